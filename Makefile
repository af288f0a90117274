# The Linux 4.10 Merge Window Lab: the front door.
# `make help` lists the verbs; the machinery lives in vm/, stages are data.

STAGE ?=
TREE ?=
CMD ?=
STAGES ?=
OUT ?=
SUBMISSIONS ?=
FORMAT ?= bundle
BUILD ?= $(CURDIR)/build
KERNEL_TREE ?= $(BUILD)/linux
export BUILD KERNEL_TREE ACCEL JOBS

# Debian's python3 (it has python3-pytest), whatever else is first on PATH.
PYTHON := /usr/bin/python3
LAB = PYTHONPATH=$(CURDIR)/vm $(PYTHON) -m lab
STAGE_ARGS = $(if $(STAGE),--stage '$(STAGE)') $(if $(TREE),--tree '$(TREE)')
DEPS = vm/deps.sh

.DEFAULT_GOAL := help
.PHONY: help deps deps-kernel deps-debug deps-check stages stage kernel boot run test \
	debug console gdb-test experiment exercise grade hint watch solutions check bench book clean \
	handout submission grade-class bench-class

help:
	@echo "The Linux 4.10 Merge Window Lab"
	@echo
	@echo "  make boot [STAGE=NN]        build the stage's kernel and boot it to a shell"
	@echo "  make run CMD='...'          boot, run one command in the guest, power off"
	@echo "  make test [STAGE=NN]        run the stage's guest tests (KTAP)"
	@echo "  make debug [STAGE=NN]       boot paused with gdb attached (console: make console)"
	@echo "  make gdb-test [STAGE=NN]    run the stage's gdb walkthroughs in batch mode"
	@echo "  make experiment [STAGE=NN] [NAME=x]  the stage's kernel with an experiment's patch"
	@echo "  make stage STAGE=NN         prepare and check out the stage branch"
	@echo "  make kernel [STAGE=NN]      build the stage's kernel"
	@echo "  make exercise STAGE=NN      create and check out exercise/NN-slug"
	@echo "  make grade [STAGE=NN] [TREE=path]  grade the exercises in a kernel tree"
	@echo "  make hint [EXERCISE=name]   the next hint for what the last grade failed"
	@echo "  make watch [STAGE=NN] [TREE=path]  grade again each time a file is saved"
	@echo "  make submission STAGE=NN [FORMAT=patch] [OUT=file]  pack your exercise commits"
	@echo "  make book                   render the chapters (HTML, EPUB, PDF)"
	@echo
	@echo "For instructors (docs/instructors.md):"
	@echo "  make handout STAGES=01,02 [OUT=dir]  the students' hand-out, without solutions"
	@echo "  make grade-class STAGE=NN SUBMISSIONS=dir/ [JOBS=N] [OUT=dir]  grade a class"
	@echo "  make solutions STAGE=NN     write the solution patches from the exercise data"
	@echo
	@echo "  make check                  run every test; ends with 'N passed, N failed, N skipped'"
	@echo "                              (STAGE=NN: only that stage's guest tier; TIER=host|guest)"
	@echo "  make bench                  measure build and boot times (docs/benchmarks.md)"
	@echo "  make bench-class [JOBS=N]   measure class grading: a new slot's first grade, then submissions/hour"
	@echo "  make deps                   install missing Debian packages"
	@echo "  make stages                 list the stages"
	@echo "  make clean                  remove build outputs (keeps the kernel tree)"
	@echo
	@echo "STAGE takes NN or the slug; without it, the stage checked out in"
	@echo "$(KERNEL_TREE) (the latest x86_64 stage for a new tree). ACCEL=tcg|kvm overrides"
	@echo "the accelerator; KERNEL_TREE= and BUILD= move the tree and build outputs."

deps:
	@$(DEPS) kernel guest debug check book

deps-kernel:
	@$(DEPS) kernel guest

deps-debug:
	@$(DEPS) kernel guest debug

deps-check:
	@$(DEPS) kernel guest debug check book

stages:
	@$(LAB) stages

stage kernel boot test exercise grade watch solutions: deps-kernel
	@$(LAB) $@ $(STAGE_ARGS)

hint:
	@$(LAB) hint $(STAGE_ARGS) $(if $(EXERCISE),--exercise '$(EXERCISE)')

run: deps-kernel
	@$(LAB) run $(STAGE_ARGS) --command '$(CMD)'

debug: deps-debug
	@$(LAB) debug $(STAGE_ARGS) $(if $(CMD),--command '$(CMD)')

gdb-test: deps-debug
	@$(LAB) gdb-test $(STAGE_ARGS)

experiment: deps-kernel
	@$(LAB) experiment $(STAGE_ARGS) $(if $(NAME),--name '$(NAME)')

console: deps-debug
	@test -S $(BUILD)/console.sock || { echo "no guest is running under make debug"; exit 2; }
	@echo "lab: guest console; Ctrl-] leaves it"
	@socat -,rawer,escape=0x1d UNIX-CONNECT:$(BUILD)/console.sock

check: deps-check
	@$(LAB) check $(if $(STAGE),--stage '$(STAGE)') $(if $(TIER),--tier '$(TIER)')

bench: deps-debug
	@$(LAB) bench

submission: deps-kernel
	@$(LAB) submission $(STAGE_ARGS) --format '$(FORMAT)' $(if $(OUT),--out '$(OUT)')

handout: deps-check
	@$(LAB) handout --stages '$(STAGES)' $(if $(OUT),--out '$(OUT)')

grade-class: deps-kernel
	@$(LAB) grade-class $(if $(STAGE),--stage '$(STAGE)') --submissions '$(SUBMISSIONS)' \
		$(if $(JOBS),--jobs '$(JOBS)') $(if $(OUT),--out '$(OUT)')

bench-class: deps-kernel
	@$(LAB) bench-class $(if $(STAGE),--stage '$(STAGE)') $(if $(JOBS),--jobs '$(JOBS)')

book: deps-check
	@$(LAB) branches
	@$(PYTHON) book/build.py --out $(BUILD)/book

clean:
	rm -rf $(KERNEL_TREE)/.kbuild $(KERNEL_TREE)/.kbuild-* $(KERNEL_TREE).workshop/.kbuild \
		$(KERNEL_TREE).workshop/.kbuild-* $(KERNEL_TREE).workshop2/.kbuild \
		$(KERNEL_TREE).workshop2/.kbuild-* $(BUILD)/kbuild $(BUILD)/kbuild-* \
		$(BUILD)/results $(BUILD)/check $(BUILD)/book
	@echo "kept $(KERNEL_TREE) (your kernel work); remove it yourself to start over"
