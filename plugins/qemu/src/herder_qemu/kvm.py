"""Does KVM really work here? A tiny guest run through the KVM ioctls, in a child process with a deadline.

``/dev/kvm`` being there, and even ``KVM_CREATE_VM`` succeeding, is not
enough: a KVM module can accept every ioctl yet fail to run a guest, or run
it so slowly that it never finishes booting (``kvm_pvm`` on a CPU without
VT-x or AMD-V does both). So the probe:

1. checks, cheaply, that ``/dev/kvm`` can be opened and that the CPU has
   ``vmx`` or ``svm`` with ``kvm_intel`` or ``kvm_amd`` loaded;
2. then runs ``python -m herder_qemu.kvm`` under a deadline: it puts a vCPU
   in 64-bit mode (identity-mapped 2 MiB page), runs a handful of
   instructions (``lock cmpxchg16b`` included, which QEMU's x86_64 CPUs
   need) ending in ``hlt``, and checks the registers they leave.

A probe that does not finish in time is killed: KVM does not work.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import stat
import struct
import subprocess
import sys
from pathlib import Path

DEVICE = Path("/dev/kvm")
PROBE_TIMEOUT = 2.5
"""How long the tiny guest may take; a working KVM runs it in milliseconds. With ``--version`` (2 s at most)
the fingerprint stays within the 5 s it has."""

# ioctl numbers from <linux/kvm.h>
KVM_GET_API_VERSION = 0xAE00
KVM_CREATE_VM = 0xAE01
KVM_GET_VCPU_MMAP_SIZE = 0xAE04
KVM_CREATE_VCPU = 0xAE41
KVM_SET_USER_MEMORY_REGION = 0x4020AE46
KVM_RUN = 0xAE80
KVM_GET_REGS = 0x8090AE81
KVM_SET_REGS = 0x4090AE82
KVM_GET_SREGS = 0x8138AE83
KVM_SET_SREGS = 0x4138AE84
KVM_EXIT_HLT = 5

MEMORY = 0x200000
CODE, DATA, PML4, PDPT, PD = 0x0, 0x1000, 0x2000, 0x3000, 0x4000
EXPECTED_RAX = 42
# mov rdi, 0x1000; mov rax, 0; mov rdx, 0; mov rbx, 7; mov rcx, 9; lock cmpxchg16b [rdi];
# mov rax, [rdi]; add rax, 35; hlt  ->  rax = 7 + 35
GUEST = bytes.fromhex(
    "48c7c700100000" "48c7c000000000" "48c7c200000000" "48c7c307000000" "48c7c109000000"
    "f0480fc70f" "488b07" "4883c023" "f4")

_SEGMENT = struct.Struct("=QIHBBBBBBBBBx")  # struct kvm_segment: 24 bytes
_SREGS_SIZE = 312
_REGS = struct.Struct("=18Q")  # rax rbx rcx rdx rsi rdi rsp rbp r8-r15 rip rflags


def precheck(cpuinfo: Path = Path("/proc/cpuinfo"), modules: Path = Path("/sys/module")) -> str | None:
    """Why KVM cannot work here, found without running anything; None if it may."""
    if not DEVICE.exists():
        return f"{DEVICE} does not exist"
    if not os.access(DEVICE, os.R_OK | os.W_OK):
        return f"{DEVICE} is not readable and writable by this user"
    try:
        flags = {word for line in cpuinfo.read_text().splitlines() if line.startswith("flags")
                 for word in line.split(":", 1)[1].split()}
    except OSError as exc:
        return f"cannot read {cpuinfo}: {exc}"
    if not flags & {"vmx", "svm"}:
        loaded = sorted(path.name for path in modules.glob("kvm*")) if modules.is_dir() else []
        return (f"the CPU has no vmx or svm flag (hardware virtualisation): {DEVICE} "
                f"({', '.join(loaded) or 'no kvm module'}) cannot run guests at native speed")
    if not any((modules / name).is_dir() for name in ("kvm_intel", "kvm_amd")):
        return "neither kvm_intel nor kvm_amd is loaded"
    return None


def probe(timeout: float = PROBE_TIMEOUT, *, skip_precheck: bool = False) -> tuple[bool, str]:
    """Whether KVM runs a guest here, and why (or why not)."""
    reason = None if skip_precheck else precheck()
    if reason:
        return False, reason
    try:
        done = subprocess.run([sys.executable, "-m", "herder_qemu.kvm"], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return False, f"a tiny guest did not finish within {timeout:g}s under KVM"
    except OSError as exc:
        return False, f"cannot run the KVM probe: {exc}"
    output = (done.stdout + done.stderr).strip().splitlines()
    message = output[-1] if output else f"exit code {done.returncode}"
    return done.returncode == 0, message


def device_groups(uid: int, groups: tuple[int, ...], device: Path = DEVICE) -> tuple[int, ...]:
    """The group QEMU, running as ``uid`` in ``groups``, must be given to open ``device`` read-write:
    none if it can already, else the device's group (``kvm``), never root's.

    :raises ValueError: only root could open it.
    """
    info = os.stat(device)
    mode = info.st_mode
    if (mode & 0o006 == 0o006 or (info.st_uid == uid and mode & 0o600 == 0o600)
            or (info.st_gid in groups and mode & 0o060 == 0o060)):
        return ()
    if info.st_gid != 0 and mode & 0o060 == 0o060:
        return (info.st_gid,)
    raise ValueError(f"{device} is open to root only (mode {stat.filemode(mode)}, group {info.st_gid}): QEMU does "
                     f"not run as root; give {device} a group of its own (kvm, as Debian's udev rules do)")


def _sregs_long_mode(raw: bytearray) -> None:
    """Set the segments, page tables and control registers of 64-bit mode into a ``kvm_sregs``."""
    code = _SEGMENT.pack(0, 0xFFFFFFFF, 8, 11, 1, 0, 0, 1, 1, 1, 0, 0)   # type, present, dpl, db, s, l, g
    data = _SEGMENT.pack(0, 0xFFFFFFFF, 16, 3, 1, 0, 1, 1, 0, 1, 0, 0)
    raw[0:24] = code  # cs
    for index in range(1, 6):  # ds es fs gs ss
        raw[index * 24:(index + 1) * 24] = data
    control = 8 * 24 + 2 * 16  # after the segments, gdt and idt
    cr0, cr2, cr3, cr4, cr8, efer = struct.unpack_from("=6Q", raw, control)
    cr0 = 0x80050033  # PG AM WP NE ET MP PE
    cr3 = PML4
    cr4 = 1 << 5  # PAE
    efer = 0x500  # LME LMA
    struct.pack_into("=6Q", raw, control, cr0, cr2, cr3, cr4, cr8, efer)


def run_guest() -> str:
    """Run :data:`GUEST` in 64-bit mode; what it did. :raises RuntimeError: it did not do it right."""
    kvm = os.open(DEVICE, os.O_RDWR | os.O_CLOEXEC)
    version = fcntl.ioctl(kvm, KVM_GET_API_VERSION, 0)
    if version != 12:
        raise RuntimeError(f"KVM API version {version}, not 12")
    vm = fcntl.ioctl(kvm, KVM_CREATE_VM, 0)
    memory = mmap.mmap(-1, MEMORY, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    memory[CODE:CODE + len(GUEST)] = GUEST
    struct.pack_into("=Q", memory, PML4, PDPT | 3)
    struct.pack_into("=Q", memory, PDPT, PD | 3)
    struct.pack_into("=Q", memory, PD, 0x83)  # present, writable, 2 MiB page at 0
    address = ctypes.addressof(ctypes.c_char.from_buffer(memory))
    fcntl.ioctl(vm, KVM_SET_USER_MEMORY_REGION, struct.pack("=IIQQQ", 0, 0, 0, MEMORY, address))
    vcpu = fcntl.ioctl(vm, KVM_CREATE_VCPU, 0)
    run = mmap.mmap(vcpu, fcntl.ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0), mmap.MAP_SHARED,
                    mmap.PROT_READ | mmap.PROT_WRITE)
    sregs = bytearray(_SREGS_SIZE)
    fcntl.ioctl(vcpu, KVM_GET_SREGS, sregs)
    _sregs_long_mode(sregs)
    fcntl.ioctl(vcpu, KVM_SET_SREGS, bytes(sregs))
    regs = [0] * 18
    regs[16], regs[17], regs[6] = CODE, 2, MEMORY  # rip, rflags, rsp
    fcntl.ioctl(vcpu, KVM_SET_REGS, _REGS.pack(*regs))
    fcntl.ioctl(vcpu, KVM_RUN, 0)
    (reason,) = struct.unpack_from("=I", run, 8)
    if reason != KVM_EXIT_HLT:
        raise RuntimeError(f"the guest stopped with KVM exit reason {reason}, not hlt ({KVM_EXIT_HLT})")
    out = bytearray(_REGS.size)
    fcntl.ioctl(vcpu, KVM_GET_REGS, out)
    rax = _REGS.unpack(out)[0]
    if rax != EXPECTED_RAX:
        raise RuntimeError(f"the guest computed {rax}, not {EXPECTED_RAX}")
    return "KVM ran a 64-bit guest"


def main() -> int:
    try:
        print(run_guest())
    except (OSError, RuntimeError) as exc:
        print(f"KVM cannot run a guest: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
