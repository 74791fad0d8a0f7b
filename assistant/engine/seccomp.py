"""The ``run_code`` child's seccomp allow-list, compiled to BPF with libseccomp (``libseccomp.so.2``).

Default deny: a system call not listed here fails with ``EPERM`` (``clone3`` with ``ENOSYS``, so that
libc would fall back to ``clone``, which is refused too). So every ``socket``/``socketpair``/``connect``/
``bind``, ``io_uring_*``, ``bpf``, ``ptrace``, ``mount``/``umount2``, ``setns``/``unshare``, every
``clone``/``fork``/``vfork`` (new processes, threads and namespaces), ``process_vm_readv/writev``,
``pidfd_getfd``, ``keyctl``/``add_key``/``request_key``, ``userfaultfd``, ``perf_event_open``, ``kill``
and its kin are refused. Only the native architecture is allowed (another ABI kills the process).

Two filters are built: the *outer* one, which bubblewrap installs (``--seccomp FD``) before it executes
the interpreter, also allows ``execve`` (that one execution), ``prctl`` (``PR_SET_NO_NEW_PRIVS``,
``PR_SET_SECCOMP``), ``seccomp`` and Landlock's calls, which the bootstrap uses; the *inner* one, which the
bootstrap installs before the agent's script, allows none of them. Filters stack: the stricter wins,
and neither can be removed.

It calls libseccomp through ``ctypes`` so that it does not depend on the server's Python version
(Debian's ``python3-seccomp`` is built for the system Python only).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import tempfile

# System calls a Python interpreter running a standard-library script needs (measured with strace
# on CPython 3.11 importing most of the standard library), and nothing that reaches outside it.
ALLOWED = (
    "read", "write", "readv", "writev", "pread64", "preadv", "preadv2",
    "open", "openat", "close", "close_range", "lseek", "fcntl", "dup", "dup2", "dup3", "pipe", "pipe2",
    "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2",
    "getdents64", "getcwd", "chdir", "fchdir", "readlink", "readlinkat", "umask",
    "mmap", "mprotect", "munmap", "mremap", "madvise", "brk",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "restart_syscall",
    "futex", "set_robust_list", "get_robust_list", "set_tid_address", "rseq", "arch_prctl",
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    "getrandom", "uname", "sysinfo", "times", "getrusage", "sched_getaffinity", "sched_yield", "getcpu",
    "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getgroups",
    "getresuid", "getresgid", "getpgrp", "getpgid", "getsid",
    "getrlimit", "setrlimit", "prlimit64",
    "poll", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
    "exit", "exit_group",
)  # fmt: skip
# Only for the outer filter: bubblewrap's init waits for its child; the bootstrap executes the interpreter
# once, applies Landlock and adds the inner filter.
BOOTSTRAP = (
    "execve",
    "wait4",
    "waitid",
    "seccomp",
    "landlock_create_ruleset",
    "landlock_add_rule",
    "landlock_restrict_self",
)
_PR_SET_SECCOMP, _PR_SET_NO_NEW_PRIVS = 22, 38
# ioctl: only the terminal query isatty() makes and the close-on-exec/non-blocking flags.
_IOCTLS = (0x5401, 0x5451, 0x5450, 0x5421, 0x541B)  # TCGETS, FIOCLEX, FIONCLEX, FIONBIO, FIONREAD

_ACT_ALLOW = 0x7FFF0000
_ACT_ERRNO = 0x00050000
_CMP_EQ = 4


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


class SeccompUnavailable(Exception):
    """libseccomp is missing or the kernel has no seccomp filters."""


@functools.cache
def _lib() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as e:
        raise SeccompUnavailable(f"libseccomp is not installed ({e})") from e
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)
    ]  # fmt: skip
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def kernel_supports_filters() -> bool:
    """Whether this kernel has seccomp filter mode (``Seccomp_filters`` in /proc/self/status)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            return any(line.startswith("Seccomp:") for line in status)
    except OSError:
        return False


@functools.cache
def build(outer: bool) -> bytes:
    """The BPF program (``struct sock_filter`` array) of the outer or the inner filter."""
    if not kernel_supports_filters():
        raise SeccompUnavailable("this kernel has no seccomp filters")
    lib = _lib()
    ctx = lib.seccomp_init(_ACT_ERRNO | errno.EPERM)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:

        def rule(name: str, action: int = _ACT_ALLOW, *cmp: _ArgCmp) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:  # not a system call of this architecture (e.g. "open" on arm64)
                return
            args = (_ArgCmp * len(cmp))(*cmp) if cmp else None
            if lib.seccomp_rule_add_array(ctx, action, nr, len(cmp), args) != 0:
                raise SeccompUnavailable(f"seccomp_rule_add({name}) failed")

        for name in ALLOWED + (BOOTSTRAP if outer else ()):
            rule(name)
        for request in _IOCTLS:
            rule("ioctl", _ACT_ALLOW, _ArgCmp(1, _CMP_EQ, request, 0))
        if outer:
            for option in (_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP):
                rule("prctl", _ACT_ALLOW, _ArgCmp(0, _CMP_EQ, option, 0))
        rule("clone3", _ACT_ERRNO | errno.ENOSYS)
        with tempfile.TemporaryFile() as out:
            if lib.seccomp_export_bpf(ctx, out.fileno()) != 0:
                raise SeccompUnavailable("seccomp_export_bpf failed")
            out.seek(0)
            program = out.read()
    finally:
        lib.seccomp_release(ctx)
    if not program or len(program) % 8:
        raise SeccompUnavailable("libseccomp exported no program")
    return program


def pipe_with(program: bytes) -> int:
    """A pipe's read end holding ``program`` (for ``bwrap --seccomp FD``); the caller closes it."""
    r, w = os.pipe()
    try:
        os.write(w, program)  # a few KB: fits in the pipe's buffer
    finally:
        os.close(w)
    return r


__all__ = ["ALLOWED", "SeccompUnavailable", "build", "kernel_supports_filters", "pipe_with"]
