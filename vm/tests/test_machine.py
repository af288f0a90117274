"""A stage declares the machine it boots ([machine] in stage.toml): the
QEMU command follows the declaration, the defaults stay the fast machine,
and a declaration the lab cannot boot is refused with the reason."""
import subprocess

import pytest

from lab import arches, qemu, settings, stages
from lab.errors import LabError


@pytest.fixture
def lab_stages(tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "STAGES_DIR", tmp_path / "stages")
    monkeypatch.setattr(settings, "BUILD", tmp_path / "build")
    monkeypatch.setenv("ACCEL", "tcg")

    def declare(text, slug="17-demo"):
        path = tmp_path / "stages" / slug
        path.mkdir(parents=True, exist_ok=True)
        (path / "stage.toml").write_text(text)
        return stages.Stage(slug, path)
    return declare


def command(stage, tmp_path, image="vmlinux"):
    kernel = tmp_path / image
    kernel.write_bytes(b"\0")
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return qemu.Boot(kernel, tmp_path / "initrd", "test", out, stage).command("stdio")


def option(cmd, flag):
    """Every value given to a QEMU flag, in order."""
    return [cmd[i + 1] for i, word in enumerate(cmd) if word == flag]


def test_the_default_machine_is_the_fast_one(lab_stages, tmp_path):
    cmd = command(lab_stages('title = "Demo"\n'), tmp_path)
    assert cmd[0] == "qemu-system-x86_64"
    assert option(cmd, "-smp") == ["2"] and option(cmd, "-m") == ["1G"]
    assert option(cmd, "-machine") == ["q35,i8042=off"]
    assert not any("pflash" in d for d in option(cmd, "-drive"))
    assert not any("virtio-rng" in d or "virtio-blk" in d for d in option(cmd, "-device"))


def test_cpus_memory_cmdline_and_rng_follow_the_declaration(lab_stages, tmp_path):
    stage = lab_stages('title = "Demo"\n[machine]\ncpus = 4\nmemory = "2G"\nrng = true\n'
                       'cmdline = ["lab.demo=1", "maxcpus=4"]\n')
    cmd = command(stage, tmp_path)
    assert option(cmd, "-smp") == ["4"] and option(cmd, "-m") == ["2G"]
    (append,) = option(cmd, "-append")
    assert "lab.demo=1 maxcpus=4" in append and append.startswith("tsc=reliable console=ttyS0")
    assert any(d.startswith("virtio-rng-pci,") for d in option(cmd, "-device"))


def test_disks_are_made_fresh_for_every_boot_with_their_files(lab_stages, tmp_path):
    stage = lab_stages('title = "Demo"\n[machine]\n'
                       '[[machine.disk]]\nname = "data"\nsize = "16M"\nfilesystem = "ext4"\n'
                       'files = "disk"\n'
                       '[[machine.disk]]\nname = "slow"\nsize = "8M"\n'
                       'properties = "num-queues=1,queue-size=64"\n')
    (stage.path / "disk").mkdir()
    (stage.path / "disk" / "hello.txt").write_text("from the host\n")
    cmd = command(stage, tmp_path)
    drives = option(cmd, "-drive")
    devices = [d for d in option(cmd, "-device") if d.startswith("virtio-blk")]
    assert devices == ["virtio-blk-pci,drive=disk-data,serial=data",
                       "virtio-blk-pci,drive=disk-slow,serial=slow,num-queues=1,queue-size=64"]
    image = tmp_path / "out.disks" / "disk-data.img"
    assert f"file={image}" in drives[0]
    # Beside the results share, where the guest's writes to it are not
    # counted as results.
    assert not list((tmp_path / "out").glob("disk-*"))
    shown = subprocess.run(["/sbin/debugfs", "-R", "cat /hello.txt", str(image)],
                           capture_output=True, text=True)
    assert shown.stdout == "from the host\n"
    # What a boot wrote is gone by the next one.
    (tmp_path / "out.disks" / "disk-slow.img").write_bytes(b"written by a guest")
    command(stage, tmp_path)
    assert (tmp_path / "out.disks" / "disk-slow.img").read_bytes()[:7] == b"\0" * 7
    assert (tmp_path / "out.disks" / "disk-slow.img").stat().st_size == 8 * 2**20


def test_ovmf_keeps_a_variable_store_per_stage_across_boots(lab_stages, tmp_path):
    if not qemu.OVMF_CODE.exists():
        pytest.fail(f"{qemu.OVMF_CODE} is missing: make deps installs ovmf for such a stage")
    stage = lab_stages('title = "Demo"\n[machine]\nfirmware = "ovmf"\n')
    cmd = command(stage, tmp_path, image="bzImage")
    store = settings.BUILD / "efivars" / "17-demo.fd"
    assert f"if=pflash,format=raw,unit=1,file={store}" in option(cmd, "-drive")
    assert "-bios" not in cmd
    store.write_bytes(store.read_bytes()[:-1] + b"\x01")  # what a boot wrote
    command(stage, tmp_path, image="bzImage")
    assert store.read_bytes().endswith(b"\x01")
    assert arches.boot_image(arches.ARCHES["x86_64"], "ovmf") == "arch/x86/boot/bzImage"


def test_an_arm64_machine_is_a_row_of_the_table(lab_stages, tmp_path, monkeypatch):
    # The command only: booting one is the kernel tier's business.
    monkeypatch.setattr(qemu.shutil, "which", lambda name: f"/usr/bin/{name}")
    stage = lab_stages('title = "Demo"\n[machine]\narch = "arm64"\n')
    cmd = command(stage, tmp_path, image="Image")
    assert cmd[0] == "qemu-system-aarch64"
    assert option(cmd, "-machine") == ["virt"] and option(cmd, "-cpu") == ["cortex-a57"]
    assert "console=ttyAMA0" in option(cmd, "-append")[0]
    assert "virtio-9p-device,fsdev=labout,mount_tag=labout" in option(cmd, "-device")
    assert set(stage.host_packages) >= {"qemu-system-arm", "gcc-aarch64-linux-gnu",
                                        "libc6-dev-arm64-cross"}
    assert "gdb-multiarch" not in stage.host_packages  # it has no walkthrough


def test_a_machine_carries_the_earlier_stages_of_its_own_architecture(lab_stages):
    first = lab_stages('title = "A"\n', "01-a")
    second = lab_stages('title = "B"\n', "02-b")
    other = lab_stages('title = "C"\n[machine]\narch = "arm64"\n', "03-c")
    later = lab_stages('title = "D"\n', "04-d")
    lineage = lambda stage: [s.slug for s in stages.machine_lineage(stage)]  # noqa: E731
    assert lineage(second) == [first.slug, second.slug]
    assert lineage(other) == [other.slug]
    assert lineage(later) == [first.slug, second.slug, later.slug]
    # The patches are another matter: every stage's tree has every earlier one's.
    assert [s.slug for s in stages.upto(later)] == ["01-a", "02-b", "03-c", "04-d"]
    # A new tree starts on the default machine's latest stage, not on
    # the last chapter when that one boots another architecture.
    lab_stages('title = "E"\n[machine]\narch = "arm64"\n', "05-e")
    assert stages.latest().slug == "05-e" and stages.default().slug == later.slug


@pytest.mark.parametrize("machine, complaint", [
    ('arch = "riscv64"', "not one the lab boots"),
    ("cpus = 0", "cpus must be"),
    ('memory = "lots"', "not a size"),
    ('firmware = "coreboot"', "firmware 'coreboot'"),
    ('arch = "arm64"\nfirmware = "ovmf"', "arm64 machines boot with direct"),
    ("gpus = 1", "unknown keys ['gpus']"),
    ('[[machine.disk]]\nname = "d"\nsize = "big"', "size 'big'"),
    ('[[machine.disk]]\nname = "d"\nsize = "1M"\nfiles = "x"', "no filesystem"),
    ('[[machine.disk]]\nname = "d"\nsize = "1M"\n[[machine.disk]]\nname = "d"\nsize = "1M"',
     "disk names repeat"),
])
def test_a_machine_the_lab_cannot_boot_is_refused_with_the_reason(lab_stages, machine, complaint):
    stage = lab_stages(f'title = "Demo"\n[machine]\n{machine}\n')
    with pytest.raises(LabError, match="stage.toml \\[machine\\]") as error:
        stage.machine
    assert complaint in str(error.value)


def test_an_unknown_key_or_a_bad_test_entry_is_refused(lab_stages):
    with pytest.raises(LabError, match="unknown keys"):
        lab_stages('title = "x"\ntimeout_seconds = 3\n').title
    with pytest.raises(LabError, match="name and a run command"):
        lab_stages('title = "x"\n[[test]]\nname = "a"\n').tests
    with pytest.raises(LabError, match="cannot use the program"):
        lab_stages('title = "x"\n[[program]]\npath = "/x"\nkind = "rust"\nsource = "x.rs"\n'
                   ).programs


def test_a_stage_in_the_old_form_is_told_where_the_new_one_is(tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "STAGES_DIR", tmp_path)
    (tmp_path / "03-old").mkdir()
    (tmp_path / "03-old" / "stage.conf").write_text("title = Old\n")
    with pytest.raises(LabError, match="stage.toml is missing.*old form"):
        stages.Stage("03-old", tmp_path / "03-old").title
