"""The architectures the lab builds and boots, as one table: adding one is
a row here, never a branch in the build or the boot. A stage picks one
with `arch` in its [machine] table."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Arch:
    name: str               # the stage's `arch`, and Debian's name for the guest's packages
    kernel_arch: str        # ARCH= of kbuild
    cross_compile: str      # CROSS_COMPILE= prefix ("" for the host's own)
    cross_package: str      # the Debian package with that compiler
    libc_package: str       # the C library the guest's programs are built against
    defconfig_target: str   # what `make tinyconfig` is run with (ARCH=... tinyconfig)
    image: str              # the file QEMU boots directly, relative to the object dir
    efi_image: str          # the EFI application firmware=ovmf boots ("" if none)
    virtio: str             # the virtio transport: "pci" (virtio-*-pci) or "device" (MMIO)
    qemu: str               # the QEMU binary
    qemu_package: str       # the Debian package with it
    gdb: str                # the gdb that reads this arch's vmlinux and talks to its stub
    gdb_package: str        # the Debian package with it
    machine: str            # -machine
    cpu_tcg: str            # -cpu under TCG
    console: str            # the kernel's console= device
    firmwares: tuple        # the stage's `firmware` values this arch supports
    bios: str               # -bios for firmware=direct, if the file exists ("" for none)
    debian_arch: str        # dpkg's name, for the guest's busybox and libraries
    fragment: str           # vm/arch/<name>.config, merged right after vm/base.config


ARCHES = {
    "x86_64": Arch(
        name="x86_64", kernel_arch="x86_64", cross_compile="", cross_package="gcc",
        libc_package="libc6-dev",
        # vmlinux itself, through its PVH entry point: no decompressor and
        # no real-mode setup, a tenth to a quarter of a second under TCG.
        defconfig_target="tinyconfig", image="vmlinux", efi_image="arch/x86/boot/bzImage",
        virtio="pci", qemu="qemu-system-x86_64", qemu_package="qemu-system-x86",
        gdb="gdb", gdb_package="gdb",
        machine="q35,i8042=off", cpu_tcg="max", console="ttyS0",
        firmwares=("direct", "ovmf"), bios="/usr/share/qemu/qboot.rom",
        debian_arch="amd64", fragment="x86_64.config"),
    "arm64": Arch(
        name="arm64", kernel_arch="arm64", cross_compile="aarch64-linux-gnu-",
        cross_package="gcc-aarch64-linux-gnu", libc_package="libc6-dev-arm64-cross",
        defconfig_target="tinyconfig",
        image="arch/arm64/boot/Image", efi_image="", virtio="device",
        qemu="qemu-system-aarch64", qemu_package="qemu-system-arm", machine="virt",
        gdb="gdb-multiarch", gdb_package="gdb-multiarch",
        cpu_tcg="cortex-a57", console="ttyAMA0", firmwares=("direct",), bios="",
        debian_arch="arm64", fragment="arm64.config"),
}


def boot_image(arch, firmware):
    """The kernel image, relative to the object dir, that this firmware boots."""
    return arch.efi_image if firmware == "ovmf" else arch.image
