"""The first code a ``run_code`` child process runs, before the agent's script (read from stdin).

This file is not imported: ``sandbox.py`` passes its source to ``python -I -S -B -c``, with a JSON
configuration as the first argument. It only uses the standard library. In order, it:

1. sets resource limits: CPU seconds, address space, no file may grow (``RLIMIT_FSIZE`` 0), no core
   file, no new process or thread (``RLIMIT_NPROC`` 0), few open files;
2. applies a Landlock ruleset when the kernel has one: the whole file system becomes read-only and
   only the exported knowledge bases and Python's own library stay readable; TCP bind and connect
   are denied; signals and abstract sockets cannot leave the sandbox;
3. installs the inner seccomp filter the parent built (``seccomp.py``: the allow-list without
   ``execve``, ``prctl`` or Landlock's calls), which nothing can remove;
4. installs an audit hook that refuses, with a message the agent reads, any write, any read outside
   those directories, any socket, any new process and ``ctypes``;
5. runs the script.

What it tells the tool (Landlock's ABI, the hook's refusals, a memory error) goes on a pipe of its own, the
``channel`` of its configuration, one JSON object a line, never on the script's stdout or stderr: nothing the
script prints is taken for a note. The files the script opens are seen by the tool itself (inotify).

The hook gives the agent a clear message; the kernel (bubblewrap's namespaces and mounts, seccomp,
the run's own user, Landlock, the limits) is what actually holds when a script gets around the hook.
"""

from __future__ import annotations

import builtins
import json
import os
import resource
import sys
import traceback
from typing import Any

RETURN_FINDINGS = "This sandbox is read-only and has no network: return what you found instead."

# Landlock (linux/landlock.h).
_FS_EXECUTE = 1 << 0
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
_NET_BIND_TCP = 1 << 0
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
_SCOPE_SIGNAL = 1 << 1
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2


def set_limits(cfg: dict[str, Any]) -> None:
    cpu = int(cfg["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(cfg["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    if cfg.get("no_processes"):
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))


def landlock(read_dirs: list[str], read_files: list[str]) -> int:
    """Restrict this process to reading ``read_dirs`` and ``read_files``; returns the ABI (0: none)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = int(libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1)))
    if abi <= 0:
        return 0
    fs = _FS_RIGHTS_BY_ABI.get(abi, (1 << 16) - 1)
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0
    fields = [fs] + ([net] if abi >= 4 else []) + ([scoped] if abi >= 6 else [])
    attr = (ctypes.c_uint64 * len(fields))(*fields)
    ruleset = int(libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    def allow(path: str, access: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            rule = PathBeneath(access, fd)
            if libc.syscall(_SYS_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0) != 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
        finally:
            os.close(fd)

    for d in read_dirs:
        allow(d, _FS_READ_FILE | _FS_READ_DIR)
    for f in read_files:
        allow(f, _FS_READ_FILE)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(ruleset)
    return abi


def seccomp_filter(program: bytes) -> None:
    """Install a seccomp BPF program (``struct sock_filter`` array) on this process, for good."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    buffer = ctypes.create_string_buffer(program, len(program))
    prog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_char_p))
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


_WRITE_EVENTS = {
    "os.remove",
    "os.rmdir",
    "os.rename",
    "os.mkdir",
    "os.chmod",
    "os.chown",
    "os.chflags",
    "os.lchflags",
    "os.link",
    "os.symlink",
    "os.truncate",
    "os.utime",
    "os.setxattr",
    "os.removexattr",
    "os.mkfifo",
    "os.mknod",
    "shutil.copyfile",
    "shutil.copymode",
    "shutil.copystat",
    "shutil.copytree",
    "shutil.move",
    "shutil.rmtree",
    "shutil.make_archive",
    "shutil.unpack_archive",
    "tempfile.mkstemp",
    "tempfile.mkdtemp",
}
_PROCESS_EVENTS = {
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
    "pty.spawn",
}
_FORBIDDEN_MODULES = {"ctypes", "_ctypes", "cffi", "_posixsubprocess", "mmap"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def tell(channel: int, **note: Any) -> None:
    """One note for the tool, on its own pipe."""
    os.write(channel, (json.dumps(note) + "\n").encode("utf-8", "replace"))


def audit_hook(read_roots: list[str], channel: int) -> Any:
    """The hook; its refusals go to the tool on ``channel`` as well as to the script as a PermissionError."""
    roots = [os.path.realpath(r) for r in read_roots]

    def readable(path: object) -> bool:
        if isinstance(path, int):
            return True
        try:
            real = os.path.realpath(os.fsdecode(path))  # type: ignore[arg-type]  # the audit hook passes any path-like or fd; an int returned above
        except (TypeError, ValueError):
            return False
        return any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots)

    def refuse(message: str) -> None:
        tell(channel, kind="refused", message=message)
        raise PermissionError(message)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = (*args, None, None, None)[:3]
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writes:
                refuse(f"writing {path!s} is not allowed. {RETURN_FINDINGS}")
            if not readable(path):
                refuse(
                    f"reading {path!s} is not allowed: only your knowledge bases (the current directory) can be read. {RETURN_FINDINGS}"
                )
        elif event in {"os.listdir", "os.scandir"}:
            if args and args[0] is not None and not readable(args[0]):
                refuse(
                    f"listing {args[0]!s} is not allowed: only your knowledge bases (the current directory) can be read."
                )
        elif event in _WRITE_EVENTS:
            refuse(f"{event} is not allowed: nothing can be written, moved or deleted. {RETURN_FINDINGS}")
        elif event.startswith("socket."):
            refuse(
                f"{event}: run_code has no network. Use web_search or web_fetch if you were given them. {RETURN_FINDINGS}"
            )
        elif event in _PROCESS_EVENTS:
            refuse(f"{event}: run_code cannot start or signal processes. {RETURN_FINDINGS}")
        elif event.startswith("ctypes.") or (
            event == "import" and args and str(args[0]).split(".")[0] in _FORBIDDEN_MODULES
        ):
            refuse(f"{event} {args[0] if args else ''}: this module is not available in run_code.")

    return hook


def main() -> None:
    cfg: dict[str, Any] = json.loads(sys.argv[1])
    code = sys.stdin.read()
    sys.stdin.close()
    sys.stdin = None
    sys.stdout.reconfigure(encoding="utf-8", errors="replace")  # type: ignore[union-attr]  # sys.stdout is a TextIOWrapper in the child (python -I), the stubs say TextIO
    sys.stderr.reconfigure(encoding="utf-8", errors="replace")  # type: ignore[union-attr]  # sys.stdout is a TextIOWrapper in the child (python -I), the stubs say TextIO
    root = str(cfg["root"])
    python_dirs = sorted({p for p in sys.path if p and os.path.isdir(p)})
    set_limits(cfg)
    abi = 0
    if cfg.get("landlock"):
        abi = landlock([root, *python_dirs, *cfg["system_dirs"]], [f for f in cfg["system_files"] if os.path.isfile(f)])
    if cfg.get("seccomp"):
        seccomp_filter(bytes.fromhex(cfg["seccomp"]))
    for name in [m for m in sys.modules if m.split(".")[0] in _FORBIDDEN_MODULES]:
        del sys.modules[name]
    channel = int(cfg["channel"])
    tell(channel, kind="landlock", abi=abi)
    sys.argv = ["run_code"]
    if cfg.get("audit_hook", True):
        sys.addaudithook(audit_hook([os.path.realpath(root), *python_dirs], channel))
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    status = 0
    try:
        exec(compile(code, "<run_code>", "exec"), namespace)
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:
        if isinstance(e, MemoryError):
            tell(channel, kind="memory")
        # Show the script's own frames only (this bootstrap's are "<string>").
        report = traceback.TracebackException.from_exception(e)
        report.stack = traceback.StackSummary.from_list([f for f in report.stack if f.filename != "<string>"])
        sys.stderr.write("".join(report.format()))
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
