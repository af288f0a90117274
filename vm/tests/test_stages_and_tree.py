"""Stage data, stage branches made with git am, the promise that a
student's uncommitted work is never discarded, and what of a stage goes
into its initramfs."""
import os
import re
import subprocess

import pytest

from conftest import REPO, git
from lab import initramfs, settings, stages, workflow
from lab.errors import LabError
from lab.tree import KernelTree


def test_real_stages_parse_and_are_numbered_in_order():
    found = stages.all_stages()
    assert found and found[0].slug == "00-base"
    assert [s.number for s in found] == sorted(s.number for s in found)
    for stage in found:
        assert stage.title != stage.slug, f"{stage.slug} has no title in stage.toml"
        assert stage.tests, f"{stage.slug} has no guest tests"
        stage.patches  # raises if the series names a missing file
        stage.programs


def test_every_stage_names_its_chapter_and_the_chapter_exists():
    for stage in stages.all_stages():
        chapter = stage.chapter
        assert (REPO / chapter).exists(), f"{stage.slug}: {chapter} does not exist"


def test_stage_resolves_by_number_slug_and_name(fake_lab):
    assert stages.resolve("01").slug == "01-demo"
    assert stages.resolve("01-demo").slug == "01-demo"
    assert stages.resolve("demo").slug == "01-demo"


def test_unknown_stage_lists_the_stages(fake_lab):
    with pytest.raises(LabError) as error:
        stages.resolve("42")
    assert "unknown stage '42'" in str(error.value)
    assert "00-base" in str(error.value) and "01-demo" in str(error.value)


def test_unknown_stage_from_the_front_door():
    result = subprocess.run(["make", "-s", "kernel", "STAGE=99-nonexistent"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "unknown stage '99-nonexistent'" in result.stderr
    assert "00-base" in result.stderr


def test_make_stages_lists_every_stage():
    shown = subprocess.run(["make", "-s", "stages"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout
    for stage in stages.all_stages():
        assert re.search(rf"^\s*{stage.number}\s+{re.escape(stage.slug)}\b", shown, re.M), \
            f"make stages does not list {stage.slug}:\n{shown}"


def test_stage_branch_is_previous_stage_plus_series(fake_lab):
    tree = KernelTree()
    workflow.prepare_stage("01")
    assert tree.head_branch() == "stage/01-demo"
    assert (tree.path / "lru.c").read_text().count("return 1;") == 1
    assert git(tree.path, "log", "--format=%s", "-1") == "lru: rotate returns one\n"
    assert tree.is_ancestor("stage/00-base", "stage/01-demo")


def test_preparing_again_is_idempotent(fake_lab):
    tree = KernelTree()
    workflow.prepare_stage("01")
    tip = tree.rev("stage/01-demo")
    workflow.prepare_stage("01")
    assert tree.rev("stage/01-demo") == tip
    assert tree.stage_is_current(stages.resolve("01"))


def test_stage_commits_are_reproducible(fake_lab, tmp_path):
    tree = KernelTree()
    workflow.prepare_stage("01")
    first = tree.rev("stage/01-demo")
    git(tree.path, "checkout", "-q", "--detach", "base")
    git(tree.path, "branch", "-D", "stage/01-demo")
    git(tree.path, "config", "--remove-section", "lab.stage.01-demo")
    workflow.prepare_stage("01")
    assert tree.rev("stage/01-demo") == first


def test_a_patch_that_no_longer_applies_names_patch_and_hunk(fake_lab):
    tree = KernelTree()
    # The source drifts: the line the patch changes is different now.
    git(tree.path, "checkout", "-q", "-b", "drift", "base")
    (tree.path / "lru.c").write_text("int rotate(void)\n{\n\treturn 2;\n}\n")
    git(tree.path, "commit", "-q", "-am", "drift")
    git(tree.path, "tag", "-f", "-a", "base", "-m", "drifted base")
    git(tree.path, "checkout", "-q", "--detach", "base")
    with pytest.raises(LabError) as error:
        workflow.prepare_stage("01")
    message = str(error.value)
    assert "patch: lru: rotate returns one" in message
    assert "failing hunk: lru.c at line 1" in message
    assert "-\treturn 0;" in message
    # Nothing is left half-applied.
    assert tree.rev("stage/01-demo") is None
    assert not tree.dirty_files()


def test_switching_stage_refuses_uncommitted_work_and_keeps_it(fake_lab):
    tree = KernelTree()
    workflow.prepare_stage("01")
    (tree.path / "lru.c").write_text("my precious work\n")
    for action in (lambda: workflow.prepare_stage("00"),
                   lambda: workflow.select("00")):
        with pytest.raises(LabError) as error:
            action()
        assert "git -C" in str(error.value) and "commit" in str(error.value)
        assert "stash" in str(error.value)
        assert (tree.path / "lru.c").read_text() == "my precious work\n"
        assert tree.head_branch() == "stage/01-demo"


def test_reading_targets_use_the_dirty_tree_as_it_is(fake_lab):
    tree = KernelTree()
    workflow.prepare_stage("01")
    (tree.path / "lru.c").write_text("my precious work\n")
    work = workflow.select("01")
    assert work.stage.slug == "01-demo"
    work = workflow.select(None)
    assert work.stage.slug == "01-demo"
    assert (tree.path / "lru.c").read_text() == "my precious work\n"


def test_new_patches_rebuild_the_branch_but_not_over_dirty_work(fake_lab):
    tree = KernelTree()
    workflow.prepare_stage("01")
    old_tip = tree.rev("stage/01-demo")
    series_dir = settings.PATCHES_DIR / "01-demo"
    patch = next(series_dir.glob("*.patch"))
    patch.write_text(patch.read_text().replace("Because.", "Because, said better."))
    (tree.path / "lru.c").write_text("my precious work\n")
    with pytest.raises(LabError):
        workflow.prepare_stage("01")
    assert (tree.path / "lru.c").read_text() == "my precious work\n"
    git(tree.path, "checkout", "-q", "--", "lru.c")
    workflow.prepare_stage("01")
    assert tree.rev("stage/01-demo") != old_tip
    assert "said better" in git(tree.path, "log", "-1", "--format=%b")


def test_stage_branch_with_foreign_commits_is_not_rewritten(fake_lab):
    tree = KernelTree()
    workflow.prepare_stage("01")
    (tree.path / "lru.c").write_text("student\n")
    git(tree.path, "commit", "-q", "-am", "student work on the stage branch")
    tip = tree.rev("HEAD")
    patch = next((settings.PATCHES_DIR / "01-demo").glob("*.patch"))
    patch.write_text(patch.read_text().replace("Because.", "Changed."))
    with pytest.raises(LabError) as error:
        workflow.prepare_stage("01")
    assert "branch -m stage/01-demo" in str(error.value)
    assert tree.rev("stage/01-demo") == tip


def test_generated_guest_file_is_the_commands_output(tmp_path):
    program = stages.Program("/usr/share/x/data", "gen", "printf '%s\\n' 1 2; echo $LAB_BUILD >&2", ())
    initramfs._build_program(tmp_path, program, tmp_path / "root")
    assert (tmp_path / "root/usr/share/x/data").read_text() == "1\n2\n"


def test_failing_generator_names_the_guest_file(tmp_path):
    program = stages.Program("/data", "gen", "echo oops >&2; exit 3", ())
    with pytest.raises(LabError) as error:
        initramfs._build_program(tmp_path, program, tmp_path / "root")
    assert "generating /data failed" in str(error.value) and "oops" in str(error.value)


def test_host_reports_see_the_results_directory(tmp_path):
    from types import SimpleNamespace
    work = SimpleNamespace(tree=SimpleNamespace(path=tmp_path), obj=tmp_path,
                           stage=SimpleNamespace(timeout=10))
    tests = [stages.Test("plot", 'echo measured > "$LAB_RESULTS/plot.svg"'),
             stages.Test("missing", 'test -s "$LAB_RESULTS/absent.svg"')]
    report = workflow.run_host_tests(work, tmp_path, True, tests, "host-reports")
    assert (tmp_path / "plot.svg").read_text() == "measured\n"
    assert [r.ok for r in report.results] == [True, False]
    assert (tmp_path / "host-reports-ktap.txt").exists()


def test_file_programs_are_copied_from_the_stage_tree(fake_lab, tmp_path):
    stage = stages.resolve("01")
    (stage.path / "stage.toml").write_text('title = "Demo"\n[[program]]\n'
                                           'path = "/usr/share/demo/lru.c"\nkind = "file"\n'
                                           'source = "lru.c"\n')
    program, = stage.programs
    assert program.kind == "file"
    root = tmp_path / "root"
    initramfs._build_program(settings.KERNEL_TREE, program, root)
    assert (root / "usr/share/demo/lru.c").read_text() == \
        (settings.KERNEL_TREE / "lru.c").read_text()


def test_unknown_program_kind_is_refused(fake_lab):
    stage = stages.resolve("01")
    (stage.path / "stage.toml").write_text('title = "Demo"\n[[program]]\npath = "/usr/bin/x"\n'
                                           'kind = "rust"\nsource = "x.rs"\n')
    with pytest.raises(LabError, match="a kind \\(c, bpf, file, gen\\)"):
        stage.programs


def test_a_host_test_may_be_a_walkthrough_and_nothing_else(fake_lab):
    stage = stages.resolve("01")
    (stage.path / "stage.toml").write_text(
        'title = "Demo"\n[[host_test]]\nname = "conf"\nrun = "true"\n'
        '[[host_test]]\nname = "gdb_conf"\nrun = "true"\nwalkthrough = true\n')
    assert [t.name for t in stage.host_walkthroughs] == ["gdb_conf"]
    assert [t.name for t in stage.host_tests] == ["conf", "gdb_conf"]
    for bad in ('walkthrough = "yes"', 'timeout = 5'):
        (stage.path / "stage.toml").write_text(
            f'title = "Demo"\n[[host_test]]\nname = "x"\nrun = "true"\n{bad}\n')
        with pytest.raises(LabError, match="may say walkthrough = true"):
            stage.host_tests
    (stage.path / "stage.toml").write_text(
        'title = "Demo"\n[[test]]\nname = "x"\nrun = "true"\nwalkthrough = true\n')
    with pytest.raises(LabError, match="a name and a run command, and may say timeout"):
        stage.tests


def test_a_boot_of_tests_with_their_own_timeouts_may_take_their_sum(fake_lab):
    stage = stages.resolve("01")
    (stage.path / "stage.toml").write_text(
        'title = "Demo"\ntimeout = 400\n[[test]]\nname = "quick"\nrun = "true"\ntimeout = 30\n'
        '[[test]]\nname = "also"\nrun = "true"\ntimeout = 50\n'
        '[[test]]\nname = "long"\nrun = "true"\n')
    quick, also, long = stage.tests
    assert stage.timeout_for([quick]) == stages.BOOT_ALLOWANCE + 30
    assert stage.timeout_for([quick, also]) == stages.BOOT_ALLOWANCE + 80
    assert stage.timeout_for([quick, long]) == 400, "a test without one: the stage's"
    assert stage.timeout_for(stage.tests) == 400
    limit = stages.BOOT_ALLOWANCE + 10
    (stage.path / "stage.toml").write_text(
        f'title = "Demo"\ntimeout = {limit}\n[[test]]\nname = "quick"\nrun = "true"\ntimeout = 30\n')
    assert stage.timeout_for(stage.tests) == limit, "never more than the stage's"
    for bad in ('timeout = 0', 'timeout = "30"', 'timeout = 2.5'):
        (stage.path / "stage.toml").write_text(
            f'title = "Demo"\n[[test]]\nname = "x"\nrun = "true"\n{bad}\n')
        with pytest.raises(LabError, match="may say timeout = <seconds>"):
            stage.tests


def test_an_experiment_names_an_existing_patch_a_command_and_a_summary(fake_lab):
    stage = stages.resolve("01")
    (stage.path / "experiments").mkdir()
    (stage.path / "experiments" / "x.patch").write_text("diff --git a/x b/x\n")
    good = ('[[experiment]]\nname = "x"\npatch = "experiments/x.patch"\nrun = "true"\n'
            'summary = "what x changes"\n')
    (stage.path / "stage.toml").write_text('title = "Demo"\n' + good)
    [experiment] = stage.experiments
    assert (experiment.name, experiment.run) == ("x", "true")
    assert experiment.patch == stage.path / "experiments" / "x.patch"
    for bad, message in [(good.replace("x.patch", "y.patch"), "no patch"),
                         (good.replace('summary = "what x changes"\n', ""), "and a summary"),
                         (good + good, "names repeat")]:
        (stage.path / "stage.toml").write_text('title = "Demo"\n' + bad)
        with pytest.raises(LabError, match=message):
            stage.experiments


def test_a_library_reached_through_a_symlinked_dir_is_copied_once(tmp_path):
    # Debian's /lib is a symlink to /usr/lib: ldd names a library under the
    # first, and the guest must get one copy, under both names.
    host = tmp_path / "host"
    (host / "usr/lib").mkdir(parents=True)
    (host / "usr/lib/libdemo.so.1").write_bytes(b"\x7fELF demo")
    (host / "lib").symlink_to("usr/lib")
    guest = tmp_path / "guest"
    initramfs._copy_host_file(str(host / "lib/libdemo.so.1"), guest)
    real = guest / str(host / "usr/lib/libdemo.so.1").lstrip("/")
    alias = guest / str(host / "lib/libdemo.so.1").lstrip("/")
    assert real.is_file() and not real.is_symlink()
    assert real.read_bytes() == b"\x7fELF demo"
    assert alias.is_symlink() and os.readlink(alias) == str(host / "usr/lib/libdemo.so.1")
    copies = [p for p in guest.rglob("libdemo.so.1") if p.is_file() and not p.is_symlink()]
    assert copies == [real]


def test_an_unchanged_guest_program_is_reused_and_a_changed_header_rebuilds_it(fake_lab, tmp_path):
    stage = stages.resolve("01")
    (settings.KERNEL_TREE / "answer.h").write_text("#define ANSWER 41\n")
    (settings.KERNEL_TREE / "answer.c").write_text(
        '#include <stdio.h>\n#include "answer.h"\nint main(void) { printf("%d\\n", ANSWER); }\n')
    (stage.path / "stage.toml").write_text('title = "Demo"\n[[program]]\npath = "/usr/bin/answer"\n'
                                           'kind = "c"\nsource = "answer.c"\n')
    program, = stage.programs
    root = tmp_path / "root"

    def build_and_run():
        initramfs._build_program(settings.KERNEL_TREE, program, root)
        return subprocess.run([str(root / "usr/bin/answer")], capture_output=True,
                              text=True).stdout.strip()

    assert build_and_run() == "41"
    kept = list((settings.BUILD / "guest-programs").iterdir())
    assert len(kept) == 1
    (root / "usr/bin/answer").unlink()
    assert build_and_run() == "41"  # from the cache
    assert list((settings.BUILD / "guest-programs").iterdir()) == kept
    (settings.KERNEL_TREE / "answer.h").write_text("#define ANSWER 42\n")
    assert build_and_run() == "42"
    assert len(list((settings.BUILD / "guest-programs").iterdir())) == 2


def test_a_worktree_of_the_kernel_tree_shares_its_workshop(fake_lab, tmp_path):
    # Two workshops would make the same stage branches at once, each
    # recording its own tip: a TREE= worktree uses the main tree's.
    main = KernelTree()
    git(main.path, "worktree", "add", "-q", "--detach", str(tmp_path / "mine"), "base")
    assert KernelTree(tmp_path / "mine").workshop().path == main.workshop().path
    assert main.workshop().path == main.path.with_name(main.path.name + ".workshop")


def copy_as_second_workshop(main):
    copy = main.copy_workshop(2, source=1)
    assert copy.path == main.workshop(2).path
    return copy


def copy_as_grading_slot(main):
    from lab import classgrade
    copy = classgrade.slot_tree(main, stages.resolve("01"), 1, seed=main.workshop(1))
    assert copy.path == settings.BUILD / "grading" / "slot-1"
    assert classgrade.slot_tree(main, stages.resolve("01"), 1).path == copy.path
    return copy


@pytest.mark.parametrize("make_copy", [copy_as_second_workshop, copy_as_grading_slot])
def test_a_copied_workshop_keeps_the_build_and_names_its_own_tree(fake_lab, make_copy):
    # A second workshop, or a new grading slot, made as a copy of a built
    # workshop must look to kbuild like a tree it built itself: same files
    # and times, and the command lines it recorded naming the copy, not
    # the workshop.
    main = KernelTree()
    main.prepare(stages.resolve("01"))
    first = main.reset_workshop("stage/01-demo")
    (first.path / "lru.c").write_text("int rotate(void)\n{\n\treturn 2;\n}\n")
    obj = first.path / ".kbuild"
    (obj / "kernel").mkdir(parents=True)
    (obj / "lru.o").write_bytes(b"\x7fELF")
    (obj / ".lru.o.cmd").write_text(
        f"cmd_lru.o := gcc -fdebug-prefix-map={obj}=/lab/tree/.kbuild -c ../lru.c\n"
        f"deps_lru.o := {first.path}/lru.c\n")
    os.utime(obj / "lru.o", ns=(1, 10**18))
    os.utime(obj / ".lru.o.cmd", ns=(1, 10**18))

    copy = make_copy(main)
    assert copy.path != first.path
    assert (copy.path / "lru.c").read_text() == (first.path / "lru.c").read_text()
    assert copy.rev("HEAD") == first.rev("HEAD")
    assert copy.dirty_files() == first.dirty_files() == [" M lru.c"]
    record = (copy.path / ".kbuild" / ".lru.o.cmd").read_text()
    assert str(first.path) + "/" not in record
    assert f"-fdebug-prefix-map={copy.path}/.kbuild=" in record
    assert f"deps_lru.o := {copy.path}/lru.c" in record
    for name in ("lru.o", ".lru.o.cmd"):
        assert (copy.path / ".kbuild" / name).stat().st_mtime_ns == 10**18
    assert (first.path / ".kbuild" / ".lru.o.cmd").read_text().count(str(first.path)) == 2


def mark_built(tree, lru):
    from lab import incremental
    (tree.path / "lru.c").write_text(lru)
    (tree.path / ".kbuild").mkdir(exist_ok=True)
    incremental.record(tree.path / ".kbuild", "base", "products", incremental.snapshot(tree.path))


def test_new_grading_slots_start_as_copies_of_the_built_workshop(fake_lab):
    from lab import classgrade, kbuild
    main, stage = KernelTree(), stages.resolve("01")
    main.prepare(stage)
    mark_built(main.reset_workshop("stage/01-demo"), "the workshop's\n")
    first, second = classgrade.grading_slots(main, stage, 2)
    assert [first.path.name, second.path.name] == ["slot-1", "slot-2"]
    for slot in (first, second):
        assert (slot.path / "lru.c").read_text() == "the workshop's\n"
        assert kbuild.has_built(slot.path)
    # An existing slot is kept as it is.
    (first.path / "lru.c").write_text("graded since\n")
    assert (classgrade.grading_slots(main, stage, 1)[0].path / "lru.c").read_text() == \
        "graded since\n"


def test_a_busy_workshop_is_not_waited_for_and_a_cold_one_is_not_copied(fake_lab):
    from lab import classgrade, kbuild
    from lab.tree import release_workshops
    main, stage = KernelTree(), stages.resolve("01")
    main.prepare(stage)
    workshop = main.reset_workshop("stage/01-demo")
    mark_built(workshop, "the workshop's\n")
    release_workshops()
    lock = workshop.path.with_name(workshop.path.name + ".lock")
    holder = subprocess.Popen(["flock", str(lock), "sleep", "60"])
    try:
        while subprocess.run(["flock", "-n", str(lock), "true"]).returncode == 0:
            pass
        # Nothing else is built: the slot is a plain checkout.
        [cold] = classgrade.grading_slots(main, stage, 1)
        assert not kbuild.has_built(cold.path)
        assert (cold.path / "lru.c").read_text() != "the workshop's\n"
        classgrade.remove_slots(main)
        assert not cold.path.exists() and str(cold.path) not in main.git("worktree", "list").stdout
        # The kernel tree itself is built: the slot starts from it.
        mark_built(main, "the tree's own\n")
        [slot] = classgrade.grading_slots(main, stage, 1)
        assert (slot.path / "lru.c").read_text() == "the tree's own\n"
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()


def test_a_grade_boot_is_given_the_timeout_of_the_tests_it_runs(fake_lab, monkeypatch):
    from lab import qemu, workflow
    stage = stages.resolve("01")
    (stage.path / "stage.toml").write_text(
        'title = "Demo"\ntimeout = 400\n[[test]]\nname = "quick"\nrun = "true"\ntimeout = 30\n'
        '[[test]]\nname = "long"\nrun = "true"\n')
    work = workflow.prepare_stage("01")
    given = []
    monkeypatch.setattr(workflow, "build_guest", lambda *args, **kwargs: fake_lab / "initrd")
    monkeypatch.setattr(qemu, "Boot", lambda *args, **kwargs: None)
    monkeypatch.setattr(qemu, "run_watched", lambda boot, timeout, *args, **kwargs: (
        given.append(timeout), qemu.Outcome(True, "the guest finished", [], 0.0))[1])
    workflow.run_tests(work, quiet=True, build=False, only={"quick"})
    workflow.run_tests(work, quiet=True, build=False)
    assert given == [stages.BOOT_ALLOWANCE + 30, 400]


def test_a_stage_whose_tests_measure_speed_runs_alone(fake_lab):
    stage = stages.resolve("01")
    (stage.path / "stage.toml").write_text('title = "Demo"\n[[test]]\nname = "x"\nrun = "true"\n')
    assert stage.runs_alone is False
    (stage.path / "stage.toml").write_text(
        'title = "Demo"\nruns_alone = true\n[[test]]\nname = "x"\nrun = "true"\n')
    assert stage.runs_alone is True
    (stage.path / "stage.toml").write_text(
        'title = "Demo"\nruns_alone = "yes"\n[[test]]\nname = "x"\nrun = "true"\n')
    with pytest.raises(LabError, match="runs_alone must be true or false"):
        stage.runs_alone
