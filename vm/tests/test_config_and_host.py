"""Config verification, accelerator choice, missing tools."""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import REPO
from lab import arches, kbuild, qemu, settings, stages
from lab.errors import LabError


def test_unmet_request_is_named(tmp_path):
    fragment = tmp_path / "frag"
    fragment.write_text("CONFIG_A=y\nCONFIG_B=m\n# CONFIG_C is not set\nCONFIG_D=y\n")
    final = tmp_path / ".config"
    final.write_text("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=y\nCONFIG_D=y\n")
    unmet = {sym: (want, got) for sym, want, got, _ in kbuild.unmet_requests([fragment], final)}
    assert unmet == {"CONFIG_B": ("m", "n"), "CONFIG_C": ("n", "y")}


def test_later_fragments_override_earlier_ones(tmp_path):
    base, stage = tmp_path / "base", tmp_path / "stage"
    base.write_text("CONFIG_X=y\n")
    stage.write_text("# CONFIG_X is not set\n")
    final = tmp_path / ".config"
    final.write_text("# CONFIG_X is not set\n")
    assert kbuild.unmet_requests([base, stage], final) == []


def test_every_fragment_is_well_formed():
    for frag in kbuild.fragments_for(stages.all_stages()):
        for line in frag.read_text().splitlines():
            line = line.strip()
            assert (not line or line.startswith("#") or kbuild.CONFIG_LINE.match(line)), \
                f"{frag}: cannot parse '{line}'"


def test_a_stage_builds_with_every_fragment_of_its_architecture_its_own_last():
    for stage in stages.all_stages():
        chosen = stages.machine_lineage(stage)
        order = kbuild.merge_order(chosen)
        assert len(order) == len(set(order)), f"{stage.slug}: a fragment merged twice"
        arch = arches.ARCHES[stage.machine.arch]
        same_arch = {settings.BASE_CONFIG, settings.ARCH_CONFIG_DIR / arch.fragment}
        same_arch |= {s.config_fragment for s in stages.all_stages()
                      if s.config_fragment and s.machine.arch == stage.machine.arch}
        assert set(order) == same_arch, stage.slug
        own = kbuild.fragments_for(chosen)[2:]
        assert order[len(order) - len(own):] == own, \
            f"{stage.slug}: its own fragments must be merged last, so that they win"


def test_paravirtual_kvm_is_not_taken_for_real_kvm(tmp_path, monkeypatch):
    monkeypatch.delenv("ACCEL", raising=False)
    modules = tmp_path / "modules"
    device = tmp_path / "kvm"
    device.write_text("")
    modules.write_text("kvm_pvm 1 0 - Live 0x0\nkvm 2 1 kvm_pvm, Live 0x0\n")
    assert qemu.accelerator(modules_file=str(modules), kvm_device=str(device)) == "tcg"
    modules.write_text("kvm_intel 1 0 - Live 0x0\nkvm 2 1 kvm_intel, Live 0x0\n")
    assert qemu.accelerator(modules_file=str(modules), kvm_device=str(device)) == "kvm"
    assert qemu.accelerator(modules_file=str(modules), kvm_device=str(tmp_path / "no-such-device")) == "tcg"


def test_accel_override_is_checked(monkeypatch):
    monkeypatch.setenv("ACCEL", "tcg")
    assert qemu.accelerator() == "tcg"
    monkeypatch.setenv("ACCEL", "hvf")
    with pytest.raises(LabError):
        qemu.accelerator()


def test_missing_qemu_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setattr(qemu.shutil, "which", lambda name: None)
    kernel = tmp_path / "vmlinux"
    kernel.write_text("")
    boot = qemu.Boot(kernel, tmp_path / "initrd", "test", tmp_path)
    with pytest.raises(LabError) as error:
        boot.command("stdio")
    assert "qemu-system-x86" in str(error.value) and "make deps" in str(error.value)


def test_missing_kernel_says_how_to_build_it(tmp_path):
    boot = qemu.Boot(tmp_path / "vmlinux", tmp_path / "initrd", "test", tmp_path)
    with pytest.raises(LabError) as error:
        boot.command("stdio")
    assert "make kernel" in str(error.value)


def test_gdb_stub_listens_on_loopback_only(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCEL", "tcg")
    kernel = tmp_path / "vmlinux"
    kernel.write_text("")
    cmd = qemu.Boot(kernel, tmp_path / "i", "shell", tmp_path, gdb_port=4321,
                    paused=True).command("stdio")
    assert cmd[cmd.index("-gdb") + 1] == "tcp:127.0.0.1:4321"
    assert "-s" not in cmd and "-S" in cmd
    assert "nokaslr" in cmd[cmd.index("-append") + 1]


def test_deps_is_a_noop_when_everything_is_installed():
    result = subprocess.run([str(REPO / "vm/deps.sh"), "kernel", "guest"], capture_output=True,
                            text=True)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == ""


def test_deps_rejects_an_unknown_group():
    result = subprocess.run([str(REPO / "vm/deps.sh"), "no-such-group"], capture_output=True,
                            text=True)
    assert result.returncode == 2 and "unknown package group" in result.stderr


def test_deps_names_missing_packages_for_an_unprivileged_user():
    if os.getuid() != 0:
        pytest.skip("needs root to drop privileges")
    top = Path(tempfile.mkdtemp(prefix="lab-deps-"))
    top.chmod(0o755)
    lab = top / "vm"
    lab.mkdir()
    (lab / "packages").write_text("demo: lab-no-such-package-xyz\n")
    script = lab / "deps.sh"
    script.write_text((REPO / "vm/deps.sh").read_text())
    script.chmod(0o755)
    result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             str(script), "demo"], capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 2
    assert "lab-no-such-package-xyz" in result.stderr and "apt-get install" in result.stderr
    shutil.rmtree(top)


@pytest.mark.kernel
def test_the_built_kernel_starts_from_tinyconfig(built_obj):
    # Symbols no fragment asks for keep tinyconfig's value. A config that
    # started from the defaults instead (what tinyconfig does when pointed
    # at another file than .config) has full-size kernel structures and is
    # not built for size.
    config = kbuild.parse_fragment(built_obj / ".config")
    assert config.get("CONFIG_64BIT") == "y"
    assert config.get("CONFIG_BASE_FULL", "n") == "n"
    assert config.get("CONFIG_EMBEDDED") == "y"
    assert config.get("CONFIG_CC_OPTIMIZE_FOR_SIZE") == "y"
