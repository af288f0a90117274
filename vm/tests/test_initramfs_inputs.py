"""The guest's root is built again exactly when something it is made of
changed: what the kernel tree holds, the modules of the last build, the
lab's own files. A test list is not part of it: it rides in the small
archive of each run."""
import subprocess

from lab import initramfs, stages


def git(tree, *args):
    subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True)


def make_tree(tmp_path):
    tree = tmp_path / "tree"
    (tree / "tools").mkdir(parents=True)
    (tree / "tools/prog.c").write_text("int main(void) { return 0; }\n")
    git(tree, "init", "-q")
    git(tree, "add", ".")
    git(tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    return tree


def test_the_key_follows_the_tree_and_the_modules_only(tmp_path):
    tree, obj = make_tree(tmp_path), tmp_path / "obj"
    obj.mkdir()
    stage_list = stages.upto(stages.resolve("00"))
    key = initramfs._inputs_key(tree, obj, stage_list)
    assert key and key == initramfs._inputs_key(tree, obj, stage_list)

    (tree / "tools/prog.c").write_text("int main(void) { return 1; }\n")
    edited = initramfs._inputs_key(tree, obj, stage_list)
    assert edited != key
    git(tree, "checkout", "-q", "tools/prog.c")
    assert initramfs._inputs_key(tree, obj, stage_list) == key

    (tree / "tools/new.h").write_text("#define NEW 1\n")
    assert initramfs._inputs_key(tree, obj, stage_list) != key
    (tree / "tools/new.h").unlink()

    module = obj / "lab-modules/lib/modules/6.1/demo.ko"
    module.parent.mkdir(parents=True)
    module.write_bytes(b"\x7fELF")
    assert initramfs._inputs_key(tree, obj, stage_list) != key


def test_a_tree_git_cannot_read_is_never_taken_as_unchanged(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert initramfs._inputs_key(plain, tmp_path, stages.upto(stages.resolve("00"))) is None


def test_the_test_list_rides_in_the_run_archive(tmp_path):
    (tmp_path / "lab-initramfs.cpio").write_bytes(b"")
    chosen = [t for t in stages.resolve("00").tests][:1]
    combined = initramfs.run_archive(tmp_path, "test", tests=chosen)
    listing = subprocess.run(["cpio", "-t"], input=combined.read_bytes(), capture_output=True,
                             check=True).stdout.decode()
    assert "lab/tests" in listing.split()
    assert (tmp_path / "lab-run/lab/tests").read_text() == \
        f"{chosen[0].name} {chosen[0].command}\n"


def test_a_programs_inputs_are_listed_again_when_one_could_have_changed(tmp_path, monkeypatch):
    """The preprocessor's list of a program's inputs is reused only while
    they are as they were: an edited header, or a header made where the
    search would now find it first, names another build."""
    monkeypatch.setattr(initramfs.settings, "BUILD", tmp_path / "build")
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (second / "a.h").write_text("#define A 1\n")
    source = tmp_path / "prog.c"
    source.write_text('#include "a.h"\nint main(void) { return A; }\n')
    compiler = ["gcc", f"-I{first}", f"-I{second}"]
    start = initramfs._cached_build(compiler, [], source)
    assert start and initramfs._cached_build(compiler, [], source) == start

    (second / "a.h").write_text("#define A 2\n")
    edited = initramfs._cached_build(compiler, [], source)
    assert edited not in (None, start)

    (first / "a.h").write_text("#define A 3\n")  # found before second/a.h from now on
    shadowed = initramfs._cached_build(compiler, [], source)
    assert shadowed not in (None, start, edited)
