"""The guest's root: busybox, the lab's guest scripts, and what the stages ask
for (programs built from the stage tree, host tools with their libraries,
verbatim files, the kernel's modules). Stages are cumulative, so a stage's
guest holds what every earlier stage put there; its test list is its own."""
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import threading
from pathlib import Path

from . import arches, settings
from .errors import LabError
from .tree import KernelTree

BUSYBOX = "/bin/busybox"
# Flags that let the stage trees' selftests build statically against
# Debian's libbpf-dev without the kernel's own tools/lib/bpf build.
C_FLAGS = ["-O2", "-g", "-static", "-Wall", "-Wno-unused-result"]
C_LIBS = ["-lbpf", "-lelf", "-lz", "-lzstd", "-lpthread", "-lm"]
# Debian's cross toolchains (libc6-dev-<arch>-cross) carry the C library
# alone: a foreign guest's programs link against nothing else.
CROSS_C_LIBS = ["-lpthread", "-lm"]
BPF_FLAGS = ["-O2", "-g", "-target", "bpf", "-D__x86_64__",
             "-I/usr/include/x86_64-linux-gnu"]


# The lab's own files that go into a guest, or into what is built for it:
# the guest scripts, the shared headers, the stages' declarations and
# sources, and the generators of data files.
LAB_INPUTS = ("vm/guest", "vm/include", "stages", "tools")


def build(tree, obj, stage, stage_list):
    """The stage's guest root as a cpio archive in obj, without the test
    list or the mode, which run_archive adds. Built again only when one of
    its inputs changed: a graded variant, a student's run with nothing
    changed, a walkthrough after a test, all boot the same root."""
    image = obj / "lab-initramfs.cpio"
    stamp = obj / "lab-initramfs.inputs"
    key = _inputs_key(tree, obj, stage_list)
    if key and image.exists() and stamp.exists() and stamp.read_text() == key:
        return image
    stamp.unlink(missing_ok=True)
    root = obj / "lab-guest"
    shutil.rmtree(root, ignore_errors=True)
    for d in ("bin", "sbin", "usr/bin", "usr/sbin", "lib", "lib64", "etc", "proc", "sys",
              "dev", "tmp", "run", "var", "root", "lab/bin", "lab/out"):
        (root / d).mkdir(parents=True, exist_ok=True)
    arch = arches.ARCHES[stage.machine.arch]
    _install_busybox(root, guest_busybox(arch))
    shutil.copytree(settings.GUEST_DIR, root, dirs_exist_ok=True, symlinks=True)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc/group").write_text("root:x:0:\n")
    foreign = arch.debian_arch != host_debian_arch()
    for each in stage_list:
        if foreign and each.host_tools:
            # Host tools are the host's own binaries: an arm64 guest could
            # run none of them.
            raise LabError(f"stage {each.slug} has host tools, which are {host_debian_arch()} "
                           f"binaries, and {stage.slug} boots {arch.name}")
        for program in each.programs:
            _build_program(tree, program, root, arch if foreign else None)
        for tool in each.host_tools:
            _copy_host_tool(tool, root)
        for path in each.host_files:
            if not os.path.isfile(path):
                raise LabError(f"host file {path} of stage {each.slug} is missing (make deps "
                               "installs the packages the stages need)")
            _copy_host_file(path, root)
        if each.guest_files:
            shutil.copytree(each.guest_files, root, dirs_exist_ok=True, symlinks=True)
    modules = obj / "lab-modules" / "lib" / "modules"
    if modules.is_dir():
        shutil.copytree(modules, root / "lib" / "modules", dirs_exist_ok=True, symlinks=True)
    (root / "lab/env").write_text(
        f"LAB_STAGE={stage.slug}\n"
        f"LAB_KERNEL_TREE_VERSION={shlex.quote(_tree_version(tree))}\n"
        f"LAB_SOURCE_PACKAGE_VERSION={shlex.quote(KernelTree(tree).source_version())}\n"
        "export LAB_STAGE LAB_KERNEL_TREE_VERSION LAB_SOURCE_PACKAGE_VERSION\n")
    _cpio(root, image)
    if key:
        stamp.write_text(key)
    return image


def _inputs_key(tree, obj, stage_list):
    """A digest of everything build() reads, or None when that cannot be
    told: the kernel tree's sources as git sees them (the stage's programs
    are built from it), the lab's own files, the modules of the last
    kernel build, and the host's packages (its tools, libraries, headers,
    compilers and busybox) through dpkg's record and the files named."""
    from . import incremental  # the kernel build's own view of the tree
    sources = incremental.snapshot(tree)
    if sources is None:
        return None
    digest = hashlib.sha256(json.dumps(sources, sort_keys=True).encode())
    digest.update("\0".join(each.slug for each in stage_list).encode())
    for top in LAB_INPUTS:
        for path in sorted((settings.REPO / top).rglob("*")):
            if path.is_file():
                digest.update(b"\0" + str(path).encode() + b"\0" + path.read_bytes())
    modules = obj / "lab-modules"
    for path in sorted(modules.rglob("*")) if modules.is_dir() else []:
        status = path.lstat()
        digest.update(f"\0{path}:{status.st_size}:{status.st_mtime_ns}".encode())
    busybox = guest_busybox(arches.ARCHES[stage_list[-1].machine.arch])
    named = ["/var/lib/dpkg/status", str(busybox)] + \
        [path for each in stage_list for path in each.host_files]
    if not _digest_states(digest, named):
        return None
    return digest.hexdigest()


def run_archive(obj, mode, command=None, tests=()):
    """A small cpio that tells /init what to do and which tests to run; the
    kernel unpacks it on top of the main initramfs when the two are
    concatenated."""
    root = obj / "lab-run"
    shutil.rmtree(root, ignore_errors=True)
    (root / "lab").mkdir(parents=True)
    text = f"LAB_MODE={mode}\n"
    if command is not None:
        text += f"LAB_CMD={shlex.quote(command)}\n"
    (root / "lab/run").write_text(text)
    listed = "\n".join(f"{t.name} {t.command}" for t in tests)
    (root / "lab/tests").write_text(listed + "\n" if listed else "")
    small = obj / "lab-run.cpio"
    _cpio(root, small)
    combined = obj / f"lab-initramfs-{mode}.cpio"
    with open(combined, "wb") as out:
        for part in (obj / "lab-initramfs.cpio", small):
            out.write(part.read_bytes())
    return combined


def one_line_archive(workdir, line, busybox=BUSYBOX):
    """busybox and an /init of one shell line: the bare guest against which
    the lab's own /init is measured, and the guest the failure tests break."""
    root = workdir / "root"
    shutil.rmtree(root, ignore_errors=True)
    (root / "bin").mkdir(parents=True)
    shutil.copy2(busybox, root / "bin/busybox")
    (root / "init").write_text(f"#!/bin/busybox sh\n{line}\n")
    (root / "init").chmod(0o755)
    image = workdir / "initramfs.cpio"
    _cpio(root, image)
    return image


def host_debian_arch():
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                          text=True).stdout.strip()


def guest_busybox(arch):
    """A static busybox for the guest's architecture: the host's own, or
    Debian's busybox-static for that architecture, fetched once with an apt
    of its own (private lists and cache under build/), so that the host's
    apt configuration and its dpkg architectures stay as they are."""
    if arch.debian_arch == host_debian_arch():
        return Path(BUSYBOX)
    place = settings.BUILD / "guest-packages" / arch.debian_arch
    binary = place / "root" / "bin" / "busybox"
    if binary.exists():
        return binary
    state = place / "apt"
    for d in ("lists/partial", "cache/archives/partial"):
        (state / d).mkdir(parents=True, exist_ok=True)
    (state / "status").touch()
    options = ["-o", f"APT::Architecture={arch.debian_arch}",
               "-o", f"APT::Architectures={arch.debian_arch}",
               "-o", f"Dir::State::Lists={state / 'lists'}",
               "-o", f"Dir::State::status={state / 'status'}",
               "-o", f"Dir::Cache={state / 'cache'}",
               "-o", "APT::Sandbox::User=root", "-q"]
    for step in (["update"], ["download", "busybox-static"]):
        result = subprocess.run(["apt-get", *options, *step], cwd=place, capture_output=True,
                                text=True)
        if result.returncode != 0:
            raise LabError(f"fetching Debian's busybox-static for {arch.debian_arch} failed "
                           f"at apt-get {step[0]}:\n{result.stderr.strip()[-2000:]}")
    (deb,) = place.glob(f"busybox-static_*_{arch.debian_arch}.deb")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(place / "root")], check=True)
    return binary


def _install_busybox(root, busybox=Path(BUSYBOX)):
    if not Path(BUSYBOX).exists():
        raise LabError(f"{BUSYBOX} is missing: install busybox-static (make deps does it)")
    shutil.copy2(busybox, root / "bin/busybox")
    # The host's busybox names the applets: the same Debian version, built
    # for another architecture, has the same ones, and cannot run here.
    applets = subprocess.run([BUSYBOX, "--list-full"], capture_output=True, text=True,
                             check=True).stdout.split()
    for applet in applets:
        # A link named busybox would replace the binary with a self-link.
        if Path(applet).name == "busybox":
            continue
        link = root / applet
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to("/bin/busybox")


def _build_program(tree, program, root, cross=None):
    """One guest program into root, built for the host's architecture or,
    with `cross` (an arches.Arch), by that architecture's cross gcc."""
    if program.kind == "gen":
        _generate_file(program, root)
        return
    if program.source.startswith("lab:"):
        source = settings.REPO / program.source[4:]
    else:
        source = tree / program.source
    if not source.exists():
        raise LabError(f"guest program source {source} does not exist "
                       f"(needed for {program.guest_path})")
    dest = root / program.guest_path.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if program.kind == "file":
        # Scripts and data of the stage tree, such as a sample's test
        # script, go in as they are (git keeps their executable bit).
        shutil.copy(source, dest)
        return
    includes = [f"-I{source.parent}", f"-I{settings.REPO}/vm/include",
                f"-I{tree}/tools/testing/selftests",
                f"-I{tree}/tools/testing/selftests/bpf",
                f"-I{tree}/tools/include/uapi", f"-I{tree}/tools/include"]
    libraries = CROSS_C_LIBS if cross else C_LIBS
    if program.kind == "c":
        gcc = f"{cross.cross_compile}gcc" if cross else "gcc"
        if not shutil.which(gcc):
            raise LabError(f"{gcc} is missing (needed for {program.guest_path}): install "
                           f"{cross.cross_package if cross else 'gcc'} (make deps does it)")
        compiler = [gcc, *C_FLAGS, *includes, *program.flags]
        cmd = [*compiler, str(source), "-o", str(dest), *libraries]
    elif cross:
        raise LabError(f"{program.guest_path}: the lab builds BPF objects for the host's "
                       f"architecture only, and this guest is {cross.name}")
    else:
        compiler = ["clang", *BPF_FLAGS, *program.flags]
        cmd = [*compiler, "-c", str(source), "-o", str(dest)]
        libraries = []
    cached = _cached_build(compiler, libraries, source)
    if cached and cached.exists():
        shutil.copy2(cached, dest)
        return
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=source.parent)
    if result.returncode != 0:
        raise LabError(f"building {program.guest_path} from {source} failed:\n"
                       f"{' '.join(cmd)}\n{result.stderr[-4000:]}")
    if cached:
        cached.parent.mkdir(parents=True, exist_ok=True)
        # Two workshops may build the same program at once.
        partial = cached.with_suffix(f".{os.getpid()}-{threading.get_ident()}.partial")
        shutil.copy2(dest, partial)
        os.replace(partial, cached)


# What the last _cached_build of each program found, while its inputs keep
# their state: a proof's many guests of one stage build the same programs.
_LAST_DIGEST = {}


def _state(paths):
    """(path, mtime, size) of each file or directory; None if one is gone.
    A directory's mtime changes when a file in it is made or removed, such
    as a header that would now be found before the one used."""
    try:
        return tuple((str(p), *(lambda s: (s.st_mtime_ns, s.st_size))(os.stat(p)))
                     for p in paths)
    except OSError:
        return None


def _digest_states(digest, paths):
    """Each file's path, mtime and size into digest; False if one is gone."""
    state = _state(paths)
    for path, mtime, size in state or ():
        digest.update(f"\0{path}:{size}:{mtime}".encode())
    return state is not None


def _cached_build(compiler, libraries, source):
    """Where the output of this build is kept, named by the content of every
    input: the command line, each file the preprocessor reads (the source,
    the stage tree's headers, the system's), and the compiler and static
    libraries as installed. An unchanged program is copied, not rebuilt;
    any change to what goes into it builds it anew. None if the inputs
    cannot be listed (the build itself then says what is wrong).

    Listing the inputs runs the preprocessor; within one run of the lab it
    is skipped while every input file, every directory they and the -I
    options name, and the installed packages are as they were."""
    memo_key = (tuple(compiler), tuple(libraries), str(source))
    last = _LAST_DIGEST.get(memo_key)
    if last and _state(last[0]) == last[1]:
        return last[2]
    deps = subprocess.run([*compiler, "-M", str(source)], capture_output=True, text=True,
                          cwd=source.parent)
    if deps.returncode != 0:
        return None
    digest = hashlib.sha256("\0".join([*compiler, *libraries, str(source)]).encode())
    # make's rule syntax: "target: dep dep \" with continued lines.
    files = deps.stdout.replace("\\\n", " ").split(":", 1)[-1].split()
    inputs = []
    for name in sorted(set(files)):
        path = Path(name) if os.path.isabs(name) else source.parent / name
        inputs.append(path)
        try:
            digest.update(b"\0" + name.encode() + b"\0" + path.read_bytes())
        except OSError:
            return None
    installed = [shutil.which(compiler[0]) or compiler[0]]
    installed += [str(p) for flag in libraries for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib")
                  if (p := Path(d) / f"lib{flag[2:]}.a").exists()]
    if not _digest_states(digest, installed):
        return None
    where = settings.BUILD / "guest-programs" / digest.hexdigest()
    searched = {flag[2:] for flag in compiler if flag.startswith("-I")}
    watched = inputs + sorted({p.parent for p in inputs} | {Path(d) for d in searched}) + \
        [Path(p) for p in installed] + [Path("/var/lib/dpkg/status")]
    state = _state(watched)
    if state is not None:
        _LAST_DIGEST[memo_key] = (watched, state, where)
    return where


def _generate_file(program, root):
    """A data file made at build time rather than committed: the command
    runs in the repository with LAB_BUILD set, and its standard output
    becomes the guest file."""
    dest = root / program.guest_path.lstrip("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LAB_BUILD=str(settings.BUILD))
    with open(dest, "wb") as out:
        result = subprocess.run(["sh", "-c", program.source], cwd=settings.REPO, env=env,
                                stdout=out, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise LabError(f"generating {program.guest_path} failed: {program.source}\n"
                       f"{result.stderr[-4000:]}")


def _copy_host_tool(name, root):
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")
    if not path:
        raise LabError(f"host tool '{name}' is not installed (make deps installs the "
                       "packages the stages need)")
    path = os.path.realpath(path)
    for item in [path, *_shared_libraries(path)]:
        _copy_host_file(item, root)
    # Tools are found under their plain name, wherever the host keeps them.
    link = root / "usr/bin" / name
    if not link.exists():
        link.symlink_to(path)


def _copy_host_file(path, root):
    """The host file at the same path in the guest. A path that reaches the
    file through symlinks (Debian's /lib is /usr/lib) becomes a symlink to
    the one copy of the file, so that each library is unpacked once."""
    real = os.path.realpath(path)
    dest = root / real.lstrip("/")
    # A host tool replaces a busybox applet of the same name (busybox has
    # its own nsenter and unshare, which would run its own ip).
    if dest.is_symlink() and os.readlink(dest) == "/bin/busybox":
        dest.unlink()
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(real, dest)
    alias = root / path.lstrip("/")
    if real != path and not alias.is_symlink() and not alias.exists():
        alias.parent.mkdir(parents=True, exist_ok=True)
        alias.symlink_to(real)


_LIBRARIES = {}


def _shared_libraries(binary):
    """The libraries ldd resolves for binary, and its dynamic loader, under
    the paths the loader looks for them at; asked once per run of the lab
    while the binary and the installed packages stay as they are."""
    key = _state([binary, "/var/lib/dpkg/status", "/etc/ld.so.cache"])
    if key is None or key not in _LIBRARIES:
        libraries = _ldd(binary)
        if key is None:
            return libraries
        _LIBRARIES[key] = libraries
    return list(_LIBRARIES[key])


def _ldd(binary):
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        parts = line.split()
        if "=>" in parts and len(parts) > parts.index("=>") + 1:
            target = parts[parts.index("=>") + 1]
            if target.startswith("/"):
                libs.append(target)
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])  # the dynamic loader itself
    return libs


def _cpio(root, image):
    files = subprocess.run(["find", ".", "-mindepth", "1"], cwd=root, capture_output=True,
                           check=True).stdout
    with open(image, "wb") as out:
        subprocess.run(["cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0"], cwd=root,
                       input=files, stdout=out, check=True)


def _tree_version(tree):
    return subprocess.run(["make", "-s", "-C", str(tree), "kernelversion"], capture_output=True,
                          text=True).stdout.strip()
