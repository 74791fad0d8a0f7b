"""``run_code``: a Python script run in a separate, read-only, offline process.

Layers, each of which holds on its own (``Sandbox.isolation`` says what this machine gives; where
bubblewrap, seccomp or user namespaces are missing, ``run_code`` is not offered at all):

- ``namespaces``: bubblewrap (``bwrap``) starts the child in new user, mount, pid, network, ipc, uts
  and cgroup namespaces, with its capabilities dropped, a new session, an empty environment, and a
  read-only root that holds only the run's export, the interpreter, its standard library and the
  system libraries it loads, ``/dev/null``, ``/dev/urandom`` and the new pid namespace's ``/proc``: no
  ``/run``, no ``/tmp``, no ``/home``, no ``/etc`` but the loader's cache, no socket of the host;
- ``seccomp``: an allow-list of system calls (``seccomp.py``): no socket of any family, no process,
  thread or namespace, no ``ptrace``, ``bpf``, ``io_uring``, ``mount``, keyring, ``kill``;
- ``uid``: when the server runs as root, a user of its own per run (from ``UID_BASE``), and the export
  readable by that run's group only (owner root, mode 0550/0440);
- ``nproc``, plus CPU, memory and file-size limits (``sandbox_child``);
- ``landlock`` when the kernel has it: read-only view of the export and Python's library, no TCP;
- ``hook``: an audit hook that refuses writes, reads elsewhere, sockets and processes with a message
  for the agent. A script can switch it off; the layers above do not depend on it.

``sandbox_probe.detect`` says what this machine gives; ``run_code.py`` is the tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inotify_simple import INotify, flags

from . import seccomp

UID_BASE = 2_000_000_000  # the per-run users: UID_BASE .. UID_BASE + UID_COUNT - 1, owned by no account
UID_COUNT = 1_000_000
LAYERS = frozenset({"namespaces", "seccomp", "uid", "nproc", "landlock", "hook"})
_CHILD_SOURCE = Path(__file__).with_name("sandbox_child.py")
_SYSTEM_DIRS = ["/usr/lib", "/lib", "/lib64", "/usr/lib64", "/usr/share/zoneinfo"]
SYSTEM_FILES = ["/etc/ld.so.cache", "/etc/localtime", "/dev/null", "/dev/urandom"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeLimits:
    """What one ``run_code`` call may use."""

    cpu_seconds: int = 10
    wall_seconds: float = 20.0
    memory_mb: int = 512
    max_output_chars: int = 20_000
    max_export_mb: int = 50
    concurrent: int = 1
    """Scripts at once in one event loop's process (``RunCode.turn``; setting ``RUN_CODE_CONCURRENT``): the others wait
    their turn, their time limits not started. Each may take ``memory_mb``: a process's scripts take at most
    ``concurrent × memory_mb``."""


@dataclass(frozen=True, slots=True)
class Isolation:
    """What this machine gives a child; ``missing`` names the layers it lacks (then no ``run_code``)."""

    python: str
    bwrap: str | None
    seccomp: bool
    uids: bool  # a user per run (the server is root)
    runtime: tuple[str, ...] = ()  # what the child's mount namespace shows of the host, read-only
    missing: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.missing

    def describe(self) -> list[str]:
        layers = ["separate process, python -I -S, resource limits, Landlock where the kernel has it, audit hook"]
        if self.bwrap:
            layers.append("bubblewrap: new user, mount, pid, network, ipc and uts namespaces; read-only minimal root")
        if self.seccomp:
            layers.append("seccomp allow-list of system calls (no sockets, processes, namespaces)")
        layers.append("a user of its own per run" if self.uids else "the server's user (the server is not root)")
        layers.extend(f"missing: {m}" for m in self.missing)
        return layers


@dataclass(frozen=True, slots=True)
class CodeResult:
    """What a child did: its exit status, its output, what it was refused and which limit ended it."""

    exit_code: int | None
    stdout: str
    stderr: str
    refusals: tuple[str, ...] = ()
    limit: str | None = None
    landlock_abi: int = 0
    read: tuple[str, ...] = ()


class Sandbox:
    """Runs scripts in child processes under ``limits``; ``layers`` (all of ``LAYERS``) is narrowed only by tests."""

    def __init__(self, limits: CodeLimits, isolation: Isolation, *, layers: frozenset[str] = LAYERS) -> None:
        unknown = layers - LAYERS
        if unknown:
            raise ValueError(f"unknown sandbox layers: {sorted(unknown)}")
        self.limits = limits
        self.isolation = isolation
        self.layers = layers
        self._uids: dict[Path, int] = {}

    @property
    def _namespaces(self) -> bool:
        return "namespaces" in self.layers and self.isolation.bwrap is not None

    @property
    def _seccomp(self) -> bool:
        return "seccomp" in self.layers and self.isolation.seccomp

    @contextlib.contextmanager
    def workdir(self) -> Iterator[Path]:
        """A fresh directory for an export (and, when root, the run's own user), removed afterwards."""
        uid: int | None = None
        if "uid" in self.layers and self.isolation.uids:
            while True:  # the directory's name reserves the user among every server process of this host
                uid = UID_BASE + secrets.randbelow(UID_COUNT)
                base = Path(tempfile.gettempdir()) / f"run_code-{uid}"
                try:
                    base.mkdir(mode=0o700)
                    break
                except FileExistsError:
                    continue
        else:
            base = Path(tempfile.mkdtemp(prefix="run_code-"))
        try:
            os.chmod(base, 0o711)  # the child may traverse it, not list it
            root = base / "kb"
            root.mkdir()
            if uid is not None:
                self._uids[root] = uid
            yield root
        finally:
            self._uids.pop(base / "kb", None)
            for d, _, _ in os.walk(base):
                with contextlib.suppress(OSError):
                    os.chmod(d, 0o700)
            shutil.rmtree(base, ignore_errors=True)

    def seal(self, root: Path) -> None:
        """Make the export read-only: owner root, readable by the run's own group only when it has a user."""
        uid = self._uids.get(root)
        for d, _dirs, files in os.walk(root, topdown=False):
            for name in files:
                p = os.path.join(d, name)
                if uid is not None:
                    os.chown(p, 0, uid)
                os.chmod(p, 0o440 if uid is not None else 0o400)
            if uid is not None:
                os.chown(d, 0, uid)
            os.chmod(d, 0o550 if uid is not None else 0o500)

    def _child(self, root: Path, channel: int) -> list[str]:
        cfg = {
            "root": str(root),
            "channel": channel,
            "cpu_seconds": self.limits.cpu_seconds,
            "memory_bytes": self.limits.memory_mb * 1024 * 1024,
            "no_processes": "nproc" in self.layers,
            "landlock": "landlock" in self.layers,
            "audit_hook": "hook" in self.layers,
            "seccomp": seccomp.build(outer=False).hex() if self._seccomp else "",
            "system_dirs": _SYSTEM_DIRS,
            "system_files": SYSTEM_FILES,
        }
        return [self.isolation.python, "-I", "-S", "-B", "-c", _CHILD_SOURCE.read_text(), json.dumps(cfg)]

    def command(self, root: Path, channel: int, seccomp_fd: int | None = None) -> list[str]:
        """The child's command line; ``channel`` is the write end of the pipe its bootstrap tells the tool on."""
        child = self._child(root, channel)
        if not self._namespaces:
            return child
        assert self.isolation.bwrap is not None
        cmd = [self.isolation.bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc"]
        cmd += ["--unshare-uts", "--unshare-cgroup-try", "--hostname", "run_code", "--die-with-parent"]
        cmd += ["--new-session", "--clearenv", "--setenv", "LANG", "C.UTF-8", "--cap-drop", "ALL"]
        for link in ("/lib", "/lib64", "/bin"):
            if os.path.islink(link):
                cmd += ["--symlink", os.readlink(link), link]
        for path in self.isolation.runtime:
            cmd += ["--ro-bind-try", path, path]
        cmd += ["--ro-bind", str(root), str(root), "--proc", "/proc", "--chdir", str(root), "--remount-ro", "/"]
        if seccomp_fd is not None:
            cmd += ["--seccomp", str(seccomp_fd)]
        return [*cmd, "--", *child]

    def _spawn(self, root: Path, channel: int) -> tuple[list[str], dict[str, Any], int | None]:
        """The command, the process options and the seccomp pipe to close once the child has started."""
        uid = self._uids.get(root)
        kwargs: dict[str, Any] = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
        fd = seccomp.pipe_with(seccomp.build(outer=True)) if self._namespaces and self._seccomp else None
        kwargs.update(
            cwd=str(root), env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, start_new_session=True,
            pass_fds=(channel,) if fd is None else (channel, fd),
        )  # fmt: skip
        return self.command(root, channel, fd), kwargs, fd

    def _sweep(self, root: Path) -> None:
        _sweep_processes(self._uids.get(root), str(root).encode())

    def probe(self) -> str:
        """Run an empty script with every layer; "" when it ran, else what went wrong."""
        with self.workdir() as root:
            self.seal(root)
            told, channel = os.pipe()
            try:
                cmd, kwargs, fd = self._spawn(root, channel)
                try:
                    done = subprocess.run(
                        cmd, input="print('ok')", capture_output=True, text=True, timeout=20, check=False, **kwargs
                    )
                except (OSError, subprocess.SubprocessError) as e:
                    return str(e)
                finally:
                    if fd is not None:
                        os.close(fd)
            finally:
                os.close(channel)
                os.close(told)
        if done.returncode == 0 and done.stdout == "ok\n":
            return ""
        lines: list[str] = str(done.stderr).strip().splitlines()
        return (lines[-1] if lines else f"exit status {done.returncode}")[:200]

    async def run(self, code: str, root: Path) -> CodeResult:
        """Run ``code`` with ``root`` (already sealed) as its working directory.

        What the script prints is its output and nothing else: the bootstrap's notes (Landlock's ABI, the hook's
        refusals, a memory error) come on a pipe of their own, and the files the script opened are what the
        kernel saw (inotify on the export), so no line a script prints can pass for a refusal or add a source.
        Cancelling the call kills the child (its whole process group) and waits for it."""
        told, channel = os.pipe()
        opened = _Opened(root)
        try:
            cmd, kwargs, fd = self._spawn(root, channel)
            try:
                proc = await asyncio.create_subprocess_exec(
                    *cmd,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    **kwargs,
                )
            finally:
                os.close(channel)
                if fd is not None:
                    os.close(fd)
        except BaseException:
            os.close(told)
            opened.close()
            self._sweep(root)
            raise
        cap = self.limits.max_output_chars * 4
        over: list[str] = []

        def too_much() -> None:
            over.append("output")
            _kill(proc)

        async def drain(stream: asyncio.StreamReader | None, sink: bytearray, most: int, when_over: Any = None) -> None:
            assert stream is not None
            while chunk := await stream.read(65536):
                if len(sink) > most or (when_over is not None and over):
                    continue  # read to the end (the child is being killed), keep nothing more
                sink += chunk
                if len(sink) > most and when_over is not None:
                    when_over()

        out, err, notes = bytearray(), bytearray(), bytearray()
        limit: str | None = None
        notes_file = os.fdopen(told, "rb", buffering=0)
        transport: asyncio.BaseTransport | None = None
        readers: asyncio.Future[Any] | None = None
        try:  # from here on, whatever happens (Stop included), the child is killed and everything closed
            notes_stream = asyncio.StreamReader()
            transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(notes_stream), notes_file
            )
            readers = asyncio.gather(
                drain(proc.stdout, out, cap, too_much),
                drain(proc.stderr, err, cap, too_much),
                drain(notes_stream, notes, _NOTES),
            )
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(code.encode("utf-8", "replace"))
                await proc.stdin.drain()
                proc.stdin.close()
            await asyncio.wait_for(asyncio.shield(readers), self.limits.wall_seconds)
            await asyncio.wait_for(proc.wait(), 2)
        except TimeoutError:
            limit = "wall"
            _kill(proc)
            if readers is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(readers, 2)
        finally:
            if proc.returncode is None:
                _kill(proc)
                self._sweep(root)  # before any wait: a second cancellation there must not leave a child behind
                await proc.wait()
            self._sweep(root)
            if readers is not None and not readers.done():
                readers.cancel()
                with contextlib.suppress(BaseException):
                    await readers
            if transport is not None:
                transport.close()
            else:
                notes_file.close()
            read = opened.close()
        code_ = proc.returncode
        if self._namespaces and code_ is not None and code_ > 128:
            code_ = 128 - code_  # bubblewrap reports a child killed by signal N as 128 + N
        told_ = _notes(bytes(notes))
        if limit is None and over:
            limit = "output"
        elif limit is None and code_ in (-signal.SIGXCPU, -signal.SIGKILL):
            limit = "cpu"
        elif limit is None and told_.memory:
            limit = "memory"
        return CodeResult(
            code_,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            told_.refusals,
            limit,
            told_.landlock_abi,
            tuple(sorted(read)),
        )


def _sweep_processes(uid: int | None, root: bytes) -> None:
    """Kill every process of the run's own user, and every process whose command line names its working directory
    ``root``: a child whose bubblewrap was killed while it set the sandbox up (before its child was bound to die with
    it, and before that child took the run's user) would otherwise outlive the call."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as f:
                uids = next((line.split()[1:] for line in f if line.startswith("Uid:")), [])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                named = root in f.read()
            if named or (uid is not None and str(uid) in uids):
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


_NOTES = 64 * 1024  # the bootstrap's notes kept, at most (a script refused in a loop writes one per refusal)


@dataclass(frozen=True, slots=True)
class _Notes:
    refusals: tuple[str, ...] = ()
    landlock_abi: int = 0
    memory: bool = False


def _notes(data: bytes) -> _Notes:
    """The bootstrap's notes, one JSON object a line; a line that is not one is left out."""
    refusals: list[str] = []
    abi, memory = 0, False
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            note = json.loads(line)
        except ValueError:
            continue
        if not isinstance(note, dict):
            continue
        if note.get("kind") == "refused" and isinstance(note.get("message"), str):
            refusals.append(note["message"])
        elif note.get("kind") == "landlock" and isinstance(note.get("abi"), int):
            abi = note["abi"]
        elif note.get("kind") == "memory":
            memory = True
    return _Notes(tuple(refusals), abi, memory)


class _Opened:
    """The export's files a child opens, as the kernel reports them (inotify ``IN_OPEN`` on each directory)."""

    def __init__(self, root: Path) -> None:
        self._inotify = INotify(nonblocking=True)
        self._dirs: dict[int, str] = {}
        self.read: set[str] = set()
        for d in [root, *(p for p in sorted(root.iterdir()) if p.is_dir())]:
            rel = "" if d == root else d.name + "/"
            self._dirs[self._inotify.add_watch(str(d), flags.OPEN)] = rel
        asyncio.get_running_loop().add_reader(self._inotify.fileno(), self._collect)

    def _collect(self) -> None:
        with contextlib.suppress(BlockingIOError):
            for event in self._inotify.read(timeout=0):
                if event.name and not event.mask & flags.ISDIR and event.wd in self._dirs:
                    self.read.add(self._dirs[event.wd] + event.name)

    def close(self) -> set[str]:
        """Stop watching; the files opened (relative to the export's root)."""
        if not self._inotify.closed:
            self._collect()
            asyncio.get_running_loop().remove_reader(self._inotify.fileno())
            self._inotify.close()
        return self.read


__all__ = ["LAYERS", "UID_BASE", "UID_COUNT", "CodeLimits", "CodeResult", "Isolation", "Sandbox"]
