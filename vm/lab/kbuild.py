"""Configure and build a teaching kernel out of tree (O=).

The config is tinyconfig + vm/base.config + the architecture's fragment
(vm/arch/<arch>.config) + every stage fragment of that architecture, the
chosen stage's and its predecessors' last, so that theirs win.
merge_config.sh silently drops symbols whose dependencies are unmet, so
every value the chosen stages request is checked afterwards; the later
stages' fragments are carried where the tree has their symbols.
"""
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
from collections import deque
from pathlib import Path

from . import arches, incremental, settings, stages
from .errors import LabError
from .log import info

CONFIG_LINE = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
NOT_SET_LINE = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")
REPRODUCIBLE = {"KBUILD_BUILD_USER": "lab", "KBUILD_BUILD_HOST": "linux-4-10-lab"}


# Where gdb and the debug info meet: see debug_prefix_map().
DEBUG_TREE = "/lab/tree"


def object_dir(tree, arch="x86_64"):
    """One O= directory per kernel tree and architecture, inside the tree:
    grading a student's tree never disturbs the default build, and an
    arm64 stage never rebuilds the x86_64 objects. kbuild names the
    sources of a build in its tree's own subdirectory relative to it
    (srctree is ".."), so every tree of the lab compiles with the same
    command lines, and ccache finds in one tree what another compiled.
    The kernel's .gitignore ignores dot files: git never sees it."""
    suffix = "" if arch == "x86_64" else f"-{arch}"
    return Path(tree).resolve() / f".kbuild{suffix}"


def has_built(tree, arch="x86_64"):
    """True when the lab has built a kernel in the tree for this machine."""
    return incremental.recorded(object_dir(tree, arch)) is not None


def is_builtin(obj, source):
    """True when the last build compiled the C file `source` (a path in
    the tree) into vmlinux rather than into a module, from kbuild's
    record of the command it ran."""
    path = Path(source)
    record = Path(obj) / path.parent / f".{path.stem}.o.cmd"
    try:
        command = record.read_text(errors="replace").split("\n", 1)[0]
    except OSError:
        return False
    return path.suffix == ".c" and "-DMODULE" not in command


# `git clean -x` in a lab-owned tree keeps the object dirs.
KEEP_ON_CLEAN = ("-e", "/.kbuild", "-e", "/.kbuild-*")


def debug_prefix_map(tree, obj):
    """The same debug info for the same sources in every tree: the build
    directory gcc records is mapped to one made-up path under DEBUG_TREE,
    which gdb maps back to the tree it debugs (set substitute-path).
    ccache does not hash the map, so an object another tree compiled is a
    hit. Only for an object dir inside its tree, where kbuild's own paths
    are relative."""
    if obj.resolve().parent != Path(tree).resolve():
        return []
    mapping = f"-fdebug-prefix-map={obj.resolve()}={DEBUG_TREE}/{obj.name}"
    return [f"KCFLAGS={os.environ.get('KCFLAGS', '')} {mapping}".strip(),
            f"KAFLAGS={os.environ.get('KAFLAGS', '')} {mapping}".strip()]


def arch_of(stage_list):
    """The architecture the last of these stages declares for its machine."""
    return arches.ARCHES[stage_list[-1].machine.arch]


def arch_args(arch):
    """kbuild's ARCH= and CROSS_COMPILE= for an architecture."""
    args = [f"ARCH={arch.kernel_arch}"]
    if arch.cross_compile:
        args.append(f"CROSS_COMPILE={arch.cross_compile}")
    return args


def parse_fragment(path):
    """{symbol: value} requested by a fragment; 'n' for '# ... is not set'."""
    wanted = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if m := CONFIG_LINE.match(line):
            wanted[m.group(1)] = m.group(2)
        elif m := NOT_SET_LINE.match(line):
            wanted[m.group(1)] = "n"
    return wanted


def fragments_for(stage_list):
    """The fragments whose every value the build checks: the base, the
    architecture's and those of these stages."""
    frags = [settings.BASE_CONFIG, settings.ARCH_CONFIG_DIR / arch_of(stage_list).fragment]
    frags += [s.config_fragment for s in stage_list if s.config_fragment]
    return frags


def carried_fragments(stage_list):
    """The fragments of the later stages of the same architecture. Every
    stage of a machine builds with them, so that moving between stages
    reconfigures nothing: a later stage's option that touches common
    headers (CONFIG_USER_NS, CONFIG_LWTUNNEL) otherwise rebuilds half the
    kernel on every move, in every tree. Their symbols that an earlier
    tree lacks are dropped, and none of their values is checked."""
    chosen = {s.slug for s in stage_list}
    arch = stage_list[-1].machine.arch
    return [s.config_fragment for s in stages.all_stages()
            if s.slug not in chosen and s.config_fragment and s.machine.arch == arch]


def merge_order(stage_list):
    """Every fragment merged, in order: the base and the architecture's,
    the carried ones, then the chosen stages', which override them."""
    checked = fragments_for(stage_list)
    return checked[:2] + carried_fragments(stage_list) + checked[2:]


def unmet_requests(fragments, config_path):
    """[(symbol, wanted, got, fragment)] for every request that did not take."""
    final = parse_fragment(config_path)
    wanted = {}
    for frag in fragments:
        for symbol, value in parse_fragment(frag).items():
            wanted[symbol] = (value, frag)
    unmet = []
    for symbol, (value, frag) in wanted.items():
        got = final.get(symbol, "n")
        if got != value:
            unmet.append((symbol, value, got, frag))
    return unmet


def make(tree, obj, *targets, arch=arches.ARCHES["x86_64"], quiet=False, log=None, nice=0):
    env = dict(os.environ, **REPRODUCIBLE)
    args = ["make", "-C", str(tree), f"O={obj}", f"-j{settings.jobs()}", *arch_args(arch)]
    if nice:
        args = ["nice", "-n", str(nice), *args]
    compiler = f"{arch.cross_compile}gcc"
    if not shutil.which(compiler):
        raise LabError(f"{compiler} is missing: install {arch.cross_package} (make deps does it)")
    if shutil.which("ccache") and os.environ.get("LAB_CCACHE", "1") != "0":
        args.append(f"CC=ccache {compiler}")
    args += debug_prefix_map(tree, obj)
    args += list(targets)
    if not quiet and log is None:
        if subprocess.run(args, env=env).returncode != 0:
            raise LabError(f"kernel build failed: {' '.join(targets)} (see the output above)")
        return
    tail = deque(maxlen=40)
    with subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as proc:
        for line in proc.stdout:
            tail.append(line)
            if log:
                log.write(line)
    if proc.returncode != 0:
        raise LabError(f"kernel build failed: {' '.join(targets)}; last lines:\n"
                       + "".join(tail))


def configure(tree, obj, stage_list):
    """Write obj/.config for these stages, touching it only when it changes,
    so an unchanged config costs no rebuild."""
    obj.mkdir(parents=True, exist_ok=True)
    final = obj / ".config"
    stamp = obj / "lab-config.key"
    key = config_key(tree, stage_list)
    if key and stamp.exists() and final.exists() and \
            stamp.read_text() == key + "|" + hashlib.sha256(final.read_bytes()).hexdigest():
        return final
    stamp.unlink(missing_ok=True)
    # The config is made in a scratch object directory of its own, under its
    # usual name: tinyconfig merges its fragment into a file literally called
    # .config, whatever KCONFIG_CONFIG says, so pointing it at another file
    # silently starts from every symbol's default instead of from allnoconfig.
    # Only its .config is thrown away: its kconfig tools stay built.
    scratch = obj / "lab-config"
    scratch.mkdir(exist_ok=True)
    candidate = scratch / ".config"
    candidate.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "KCONFIG_CONFIG"}
    arch = arch_of(stage_list)
    # ARCH=x86_64, not the host's x86: x86's tinyconfig is otherwise 32-bit.
    base = ["make", "-s", "-C", str(tree), f"O={scratch}", *arch_args(arch)]
    frags = fragments_for(stage_list)
    steps = [
        base + [arch.defconfig_target],
        [str(tree / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(scratch),
         str(candidate), *map(str, merge_order(stage_list))],
        base + ["olddefconfig"],
    ]
    for step in steps:
        # merge_config.sh leaves temporary files in its working directory.
        result = subprocess.run(step, env=env, capture_output=True, text=True, cwd=scratch)
        if result.returncode != 0:
            raise LabError(f"configuring the kernel failed at: {' '.join(step)}\n"
                           + (result.stdout + result.stderr)[-3000:])
    unmet = unmet_requests(frags, candidate)
    if unmet:
        lines = [f"  {sym}: asked for '{want}' in {settings.shown(frag)}, Kconfig gave '{got}'"
                 for sym, want, got, frag in unmet]
        raise LabError("these config requests did not take effect (an unmet "
                       "dependency, or a symbol this tree does not have):\n" + "\n".join(lines)
                       + f"\nInspect with: make -C {tree} O={scratch} menuconfig")
    if not final.exists() or final.read_bytes() != candidate.read_bytes():
        shutil.copyfile(candidate, final)
    if key:
        stamp.write_text(key + "|" + hashlib.sha256(final.read_bytes()).hexdigest())
    return final


def _git_out(tree, *args):
    result = subprocess.run(["git", "-C", str(tree), *args], capture_output=True)
    return result.stdout if result.returncode == 0 else None


def source_state(tree, paths=()):
    """What the tree's sources are now, as git sees them: the index, every
    change to a tracked file and every untracked file's content, of the
    whole tree or of the pathspecs given. Two equal states mean the same
    sources, whatever was checked out or edited in between; None when it
    cannot be known."""
    digest = hashlib.sha256()
    # Stat information the index lacks (a checkout, a touch) would make
    # every diff below read those files again; git status does the same.
    subprocess.run(["git", "-C", str(tree), "update-index", "-q", "--refresh"],
                   capture_output=True)
    limit = ["--", *paths] if paths else []
    # The whole tree's index is HEAD plus what is staged; a few paths' is
    # cheaper to list than to diff against HEAD.
    parts = [_git_out(tree, "ls-files", "-s", *limit) if paths else
             _git_out(tree, "rev-parse", "HEAD"),
             _git_out(tree, "diff", *([] if paths else ["HEAD"]), "--binary", "--no-ext-diff",
                      "--no-color", *limit),
             _git_out(tree, "ls-files", "-z", "--others", "--exclude-standard", *limit)]
    if any(part is None for part in parts):
        return None
    *tracked, untracked = parts
    for part in tracked:
        digest.update(part + b"\0")
    for name in sorted(untracked.split(b"\0")):
        path = Path(tree) / name.decode(errors="surrogateescape")
        if name and path.is_file():
            digest.update(name + b"\0" + path.read_bytes())
    return digest.hexdigest()


# What Kconfig reads, besides the fragments: every Kconfig file, the
# scripts it runs and the configs tinyconfig merges.
CONFIG_INPUTS = (":(glob)**/Kconfig*", "scripts", "arch/*/configs", "kernel/configs", "Makefile")


def config_key(tree, stage_list):
    arch = arch_of(stage_list)
    state = source_state(tree, CONFIG_INPUTS)
    compiler = shutil.which(f"{arch.cross_compile}gcc")
    if state is None or compiler is None:
        return None
    compiler = Path(compiler).resolve()
    digest = hashlib.sha256(f"{state}|{arch.name}|{compiler}|"
                            f"{compiler.stat().st_mtime_ns}".encode())
    for frag in merge_order(stage_list):
        digest.update(str(frag).encode() + b"\0" + Path(frag).read_bytes())
    return digest.hexdigest()


def base_key(obj, stage_list, targets, arch):
    """Everything a build's products depend on but the sources: the
    object dir, the fragments, the targets, the flags and the compiler.
    None when the compiler is missing."""
    compiler = shutil.which(f"{arch.cross_compile}gcc")
    if compiler is None:
        return None
    compiler = Path(compiler).resolve()
    digest = hashlib.sha256(f"{obj}|{arch.name}|{' '.join(targets)}|{compiler}|"
                            f"{compiler.stat().st_mtime_ns}|{os.environ.get('KCFLAGS')}|"
                            f"{os.environ.get('KAFLAGS')}".encode())
    for frag in merge_order(stage_list):
        digest.update(str(frag).encode() + b"\0" + Path(frag).read_bytes())
    return digest.hexdigest()


def products_state(obj, image):
    """The config and products as the last build left them: anything else
    that builds in the object dir (a make by hand, a host test) makes the
    next build run kbuild again."""
    digest = hashlib.sha256()
    for path in (obj / ".config", obj / "vmlinux", obj / image, obj / "lab-modules"):
        if not path.exists():
            return "|missing"
        digest.update(f"{path}:{path.stat().st_mtime_ns}".encode())
    digest.update((obj / ".config").read_bytes())
    return "|" + digest.hexdigest()


def _least_work(tree, obj, base, image, sources):
    """What incremental.plan says the edits since the last build need, or
    None for kbuild's whole build: only when the last build's record
    holds and nothing else has built here since."""
    last = incremental.recorded(obj)
    if not last or sources is None or base is None or last["base"] != base \
            or last["products"] != products_state(obj, image):
        return None
    changed = incremental.changed_paths(tree, last["sources"], sources)
    return None if changed is None else incremental.plan(obj, changed, tree)


def build_targets(image):
    """What build() makes. vmlinux is what gdb reads (and, through PVH,
    what x86 boots); the image target, where it is another file, is only
    built when booted."""
    return ["vmlinux", "modules", "scripts_gdb"] + \
        ([Path(image).name] if image != "vmlinux" else [])


def build(tree, obj, stage_list, quiet=False, nice=0):
    """Build what the last stage's machine boots, the vmlinux gdb reads,
    the modules and the kernel's gdb helpers; returns the boot image.
    When nothing that goes into them changed since the last build, the
    products are used as they are: configuring and kbuild's own no-op
    take about ten seconds, a student's every make run. When a few files
    changed, only what reads them is built again (see incremental)."""
    arch = arch_of(stage_list)
    image = arches.boot_image(arch, stage_list[-1].machine.firmware)
    targets = build_targets(image)
    # Both taken before the build begins: an edit made while it runs
    # makes the next build run again.
    base = base_key(obj, stage_list, targets, arch)
    sources = incremental.snapshot(tree)
    work = _least_work(tree, obj, base, image, sources)
    if work == (set(), set()):
        # Nothing kbuild reads changed, Kconfig's inputs included: no
        # configuring either.
        info(f"the kernel in {obj} is up to date")
        return obj / image
    incremental.forget(obj)
    config = obj / ".config"
    config_time = config.stat().st_mtime_ns if config.exists() else None
    configure(tree, obj, stage_list)
    if config.stat().st_mtime_ns != config_time:
        work = None
    log_path = obj / "lab-build.log"
    with open(log_path, "w") if quiet else contextlib.nullcontext() as log:
        if work is None:
            info(f"building the kernel in {obj}")
            make(tree, obj, *targets, arch=arch, quiet=quiet, log=log, nice=nice)
        else:
            objects, builtin = work
            info(f"building the kernel in {obj}: {len(objects)} object(s) changed")
            make(tree, obj, *sorted(objects), arch=arch, quiet=quiet, log=log, nice=nice)
            if builtin:
                incremental.mark_newer(incremental.archives_above(obj, builtin))
            make(tree, obj, f"build-dir={incremental.no_walk_dir(obj)}", *targets,
                 arch=arch, quiet=quiet, log=log, nice=nice)
        staging = obj / "lab-modules"
        shutil.rmtree(staging, ignore_errors=True)
        make(tree, obj, "modules_install", f"INSTALL_MOD_PATH={staging}",
             "INSTALL_MOD_STRIP=1", "DEPMOD=/sbin/depmod", arch=arch, quiet=True, log=log)
    if base and sources:
        incremental.record(obj, base, products_state(obj, image), sources)
    return obj / image


def build_module(tree, obj, stage_list, module, quiet=False, nice=0):
    """Build one module of the tree as it is and stage it for the guest,
    leaving vmlinux and every other module as the last build of these
    stages left them: for a grade whose tests use nothing but that module.
    The build is no longer what its record says, so the next build() runs
    kbuild again. False, with nothing built, when the object dir holds no
    build of these stages: then only build() will do."""
    arch = arch_of(stage_list)
    image = arches.boot_image(arch, stage_list[-1].machine.firmware)
    last = incremental.recorded(obj)
    base = base_key(obj, stage_list, build_targets(image), arch)
    release = kernel_release(obj)
    if not last or base is None or last["base"] != base or not release:
        return False
    staged = obj / "lab-modules" / "lib" / "modules" / release / "kernel" / module
    if not staged.exists():
        raise LabError(f"{module} is not one of the modules of {obj}")
    log_path = obj / "lab-build.log"
    with open(log_path, "w") if quiet else contextlib.nullcontext() as log:
        info(f"building {module} alone in {obj}")
        make(tree, obj, module, arch=arch, quiet=quiet, log=log, nice=nice)
    # What modules_install does with INSTALL_MOD_STRIP=1.
    subprocess.run([f"{arch.cross_compile}strip", "--strip-debug", "-o", str(staged),
                    str(obj / module)], check=True)
    os.utime(obj / "lab-modules")  # see products_state()
    return True


def kernel_release(obj):
    path = obj / "include/config/kernel.release"
    return path.read_text().strip() if path.exists() else None
