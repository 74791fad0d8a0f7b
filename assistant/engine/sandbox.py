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

The knowledge bases of the caller's scope, and only those, are exported as text files into a fresh
temporary directory that is the script's working directory, and removed afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import seccomp
from .errors import ToolError
from .events import Action, Source
from .scope import Scope
from .tools import Document, Tool, ToolFactory, ToolOutcome
from .types import ToolSpec

UID_BASE = 2_000_000_000  # the per-run users: UID_BASE .. UID_BASE + UID_COUNT - 1, owned by no account
UID_COUNT = 1_000_000
REFUSED = "run_code refused: "
LAYERS = frozenset({"namespaces", "seccomp", "uid", "nproc", "landlock", "hook"})
_MARK = "\x00sandbox "
_CHILD_SOURCE = Path(__file__).with_name("sandbox_child.py")
_SYSTEM_DIRS = ["/usr/lib", "/lib", "/lib64", "/usr/lib64", "/usr/share/zoneinfo"]
_SYSTEM_FILES = ["/etc/ld.so.cache", "/etc/localtime", "/dev/null", "/dev/urandom"]
_RUNTIME_PROBE = (
    "import json, sys, sysconfig; print(json.dumps([sys.path, sysconfig.get_config_var('MULTIARCH') or '']))"
)


class KnowledgeExport(Protocol):
    """The documents of a knowledge base, for ``run_code``'s read-only export."""

    async def documents(self, kb: str) -> list[Document]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeLimits:
    """What one ``run_code`` call may use."""

    cpu_seconds: int = 10
    wall_seconds: float = 20.0
    memory_mb: int = 512
    max_output_chars: int = 20_000
    max_export_mb: int = 50


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


def _world_executable(path: str) -> bool:
    """Whether a user with no privilege can execute ``path`` (every parent directory searchable)."""
    real = Path(os.path.realpath(path))
    try:
        if not real.stat().st_mode & 0o001:
            return False
        return all(p.stat().st_mode & 0o001 for p in real.parents)
    except OSError:
        return False


def _run(cmd: list[str], user: int | None, **kwargs: Any) -> subprocess.CompletedProcess[str] | None:
    if user is not None:
        kwargs.update(user=user, group=user, extra_groups=[])
    try:
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=20, check=False, env={"PATH": "/usr/bin:/bin"}, **kwargs
        )
    except (OSError, subprocess.SubprocessError):
        return None


def _runtime(python: str, user: int | None) -> tuple[str, ...] | None:
    """What the interpreter needs to see: itself, its library, the system libraries, the loader's files."""
    done = _run([python, "-I", "-S", "-c", _RUNTIME_PROBE], user)
    if done is None or done.returncode != 0:
        return None
    path, multiarch = json.loads(done.stdout)
    paths = [os.path.realpath(python), *(p for p in path if os.path.exists(p))]
    for d in [
        "/usr/lib64",
        "/usr/share/zoneinfo",
        *([f"/usr/lib/{multiarch}", f"/lib/{multiarch}"] if multiarch else []),
    ]:
        paths.append(d)
    paths += [os.path.realpath("/lib64") if not os.path.islink("/lib64") else "/lib64", *_SYSTEM_FILES]
    return tuple(dict.fromkeys(paths))


@functools.cache
def detect(python: str | None = None) -> Isolation | None:
    """What isolation this machine gives, or None where no child can be started (not Linux, no Python)."""
    if not sys.platform.startswith("linux"):
        return None
    root = os.geteuid() == 0
    probe_user = UID_BASE if root else None
    candidates = [python] if python else [getattr(sys, "_base_executable", sys.executable), "/usr/bin/python3"]
    candidates = [c for c in dict.fromkeys(candidates) if c and os.path.exists(c)]
    found: tuple[str, tuple[str, ...]] | None = None
    for py in candidates:
        if root and not _world_executable(py):
            continue
        runtime = _runtime(py, probe_user)
        if runtime is not None:
            found = (os.path.realpath(py), runtime)
            break
    if found is None:
        return None
    missing: list[str] = []
    bwrap = shutil.which("bwrap", path="/usr/bin:/bin:/usr/local/bin")
    if bwrap is None:
        missing.append("bubblewrap (bwrap) is not installed")
    try:
        seccomp.build(outer=True)
        seccomp.build(outer=False)
        has_seccomp = True
    except seccomp.SeccompUnavailable as e:
        missing.append(f"seccomp: {e}")
        has_seccomp = False
    isolation = Isolation(found[0], bwrap, has_seccomp, root, found[1], tuple(missing))
    if bwrap is not None:
        problem = Sandbox(CodeLimits(), isolation).probe()
        if problem:
            isolation = Isolation(
                found[0], None, has_seccomp, root, found[1], (*missing, f"bubblewrap cannot start a sandbox: {problem}")
            )
    return isolation


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

    def _child(self, root: Path) -> list[str]:
        cfg = {
            "root": str(root),
            "cpu_seconds": self.limits.cpu_seconds,
            "memory_bytes": self.limits.memory_mb * 1024 * 1024,
            "no_processes": "nproc" in self.layers,
            "landlock": "landlock" in self.layers,
            "audit_hook": "hook" in self.layers,
            "seccomp": seccomp.build(outer=False).hex() if self._seccomp else "",
            "system_dirs": _SYSTEM_DIRS,
            "system_files": _SYSTEM_FILES,
        }
        return [self.isolation.python, "-I", "-S", "-B", "-c", _CHILD_SOURCE.read_text(), json.dumps(cfg)]

    def command(self, root: Path, seccomp_fd: int | None = None) -> list[str]:
        child = self._child(root)
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

    def _spawn(self, root: Path) -> tuple[list[str], dict[str, Any], int | None]:
        """The command, the process options and the seccomp pipe to close once the child has started."""
        uid = self._uids.get(root)
        kwargs: dict[str, Any] = {"user": uid, "group": uid, "extra_groups": []} if uid is not None else {}
        fd = seccomp.pipe_with(seccomp.build(outer=True)) if self._namespaces and self._seccomp else None
        kwargs.update(
            cwd=str(root), env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, start_new_session=True,
            pass_fds=(fd,) if fd is not None else (),
        )  # fmt: skip
        return self.command(root, fd), kwargs, fd

    def probe(self) -> str:
        """Run an empty script with every layer; "" when it ran, else what went wrong."""
        with self.workdir() as root:
            self.seal(root)
            cmd, kwargs, fd = self._spawn(root)
            try:
                done = subprocess.run(
                    cmd, input="print('ok')", capture_output=True, text=True, timeout=20, check=False, **kwargs
                )
            except (OSError, subprocess.SubprocessError) as e:
                return str(e)
            finally:
                if fd is not None:
                    os.close(fd)
        if done.returncode == 0 and done.stdout == "ok\n":
            return ""
        lines: list[str] = str(done.stderr).strip().splitlines()
        return (lines[-1] if lines else f"exit status {done.returncode}")[:200]

    async def run(self, code: str, root: Path) -> CodeResult:
        """Run ``code`` with ``root`` (already sealed) as its working directory."""
        cmd, kwargs, fd = self._spawn(root)
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                **kwargs,
            )
        finally:
            if fd is not None:
                os.close(fd)
        cap = self.limits.max_output_chars * 4
        over: list[str] = []

        async def drain(stream: asyncio.StreamReader | None, sink: bytearray) -> None:
            assert stream is not None
            while chunk := await stream.read(65536):
                if over:
                    continue  # read to the end (the child is being killed), keep nothing more
                sink += chunk
                if len(sink) > cap:
                    over.append("output")
                    _kill(proc)

        out, err = bytearray(), bytearray()
        limit: str | None = None
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(code.encode("utf-8", "replace"))
            await proc.stdin.drain()
            proc.stdin.close()
        readers = asyncio.gather(drain(proc.stdout, out), drain(proc.stderr, err))
        try:
            await asyncio.wait_for(asyncio.shield(readers), self.limits.wall_seconds)
            await asyncio.wait_for(proc.wait(), 2)
        except TimeoutError:
            limit = "wall"
            _kill(proc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(readers, 2)
        finally:
            if proc.returncode is None:
                _kill(proc)
                await proc.wait()
        code_ = proc.returncode
        if self._namespaces and code_ is not None and code_ > 128:
            code_ = 128 - code_  # bubblewrap reports a child killed by signal N as 128 + N
        if limit is None and over:
            limit = "output"
        elif limit is None and code_ in (-signal.SIGXCPU, -signal.SIGKILL):
            limit = "cpu"
        return _parse(code_, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), limit)


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _parse(exit_code: int | None, stdout: str, stderr: str, limit: str | None) -> CodeResult:
    refusals: list[str] = []
    read: list[str] = []
    abi = 0
    kept: list[str] = []
    for line in stderr.splitlines():
        if line.startswith(_MARK + "landlock="):
            abi = int(line[len(_MARK + "landlock=") :] or 0)
        elif line.startswith(_MARK + "read "):
            read.append(line[len(_MARK + "read ") :])
        else:
            if line.startswith(REFUSED):
                refusals.append(line[len(REFUSED) :])
            kept.append(line)
    err = "\n".join(kept)
    if limit is None and "MemoryError" in err:
        limit = "memory"
    return CodeResult(exit_code, stdout, err, tuple(refusals), limit, abi, tuple(read))


_SAFE = re.compile(r"[^\w.-]+")


def _safe_name(name: str) -> str:
    cleaned = _SAFE.sub("_", name).strip("._") or "_"
    return cleaned[:120]


@dataclass(slots=True)
class _Export:
    files: dict[str, Document] = field(default_factory=dict)
    truncated: bool = False


class RunCode(Tool):
    """``run_code(code)``: Python over a read-only copy of the scope's knowledge bases; no network, no writes."""

    def __init__(self, sandbox: Sandbox, scope: Scope, knowledge: KnowledgeExport | None) -> None:
        self.sandbox = sandbox
        self.scope = scope
        self.knowledge = knowledge

    @property
    def spec(self) -> ToolSpec:
        kbs = ", ".join(self.scope.knowledge_bases)
        files = (
            f"The working directory holds the documents of your knowledge bases ({kbs}) as read-only text files "
            "<kb>/<document id>.txt, listed in index.json (id, kb, title, path). "
            if kbs
            else "No knowledge base is available to the script. "
        )
        limits = self.sandbox.limits
        return ToolSpec(
            name="run_code",
            description=(
                "Run a Python 3 script (standard library only) and get what it prints. "
                + files
                + "The script has no network and cannot write, delete or create any file; "
                f"limits: {limits.cpu_seconds} s of CPU, {limits.wall_seconds:g} s in all, {limits.memory_mb} MB of memory. "
                "Use it to count, filter, compute or cross-check what the documents say; print the results."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "A complete Python 3 script; print() the results."}
                },
                "required": ["code"],
            },
        )

    async def _export(self, root: Path) -> _Export:
        export = _Export()
        budget = self.sandbox.limits.max_export_mb * 1024 * 1024
        index: list[dict[str, str]] = []
        for kb in self.scope.knowledge_bases:
            docs = await self.knowledge.documents(kb) if self.knowledge is not None else []
            kb_dir = root / _safe_name(kb)
            kb_dir.mkdir(exist_ok=True)
            for doc in docs:
                if doc.kb != kb:  # a backend bug must not widen the scope
                    continue
                data = doc.text.encode("utf-8")
                if len(data) > budget:
                    export.truncated = True
                    break
                budget -= len(data)
                rel = f"{kb_dir.name}/{_safe_name(doc.id)}.txt"
                (root / rel).write_bytes(data)
                export.files[rel] = doc
                index.append({"id": doc.id, "kb": kb, "title": doc.title, "path": rel})
        (root / "index.json").write_text(json.dumps(index, ensure_ascii=False, indent=1), encoding="utf-8")
        return export

    async def run(self, args: dict[str, Any]) -> ToolOutcome:
        code = args.get("code")
        if not isinstance(code, str) or not code.strip():
            raise ToolError("run_code needs 'code', a Python 3 script as a string.")
        with self.sandbox.workdir() as root:
            export = await self._export(root)
            self.sandbox.seal(root)
            result = await self.sandbox.run(code, root)
        first_line = code.strip().splitlines()[0][:80]
        if result.refusals:
            output = _tail(result.stdout, 2_000)
            raise ToolError(result.refusals[0] + (f" Output before the refusal: {output}" if output else ""))
        limit = self.sandbox.limits
        notes = {
            "cpu": f"Stopped: the CPU-time limit ({limit.cpu_seconds} s) was reached.",
            "wall": f"Stopped: the time limit ({limit.wall_seconds:g} s) was reached.",
            "memory": f"The memory limit ({limit.memory_mb} MB) was reached.",
            "output": "Stopped: the script printed too much; print a summary instead.",
        }
        payload: dict[str, object] = {
            "exit_code": result.exit_code,
            "stdout": _head(result.stdout, limit.max_output_chars),
        }
        if result.stderr.strip():
            payload["stderr"] = _tail(result.stderr, 4_000)
        if result.limit:
            payload["limit"] = notes[result.limit]
        if export.truncated:
            payload["note"] = f"The export stopped at {limit.max_export_mb} MB: some documents are missing."
        sources = tuple(
            Source(id=doc.id, title=doc.title, where=doc.kb)
            for rel, doc in export.files.items()
            if rel in set(result.read)
        )
        ok = result.exit_code == 0 and result.limit is None
        action = Action(tool="run_code", kind="code", label=first_line, count=len(sources) or None, ok=ok)
        return ToolOutcome(json.dumps(payload, ensure_ascii=False), action, sources)


def _head(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "… (output cut)"


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def code_tools(sandbox: Sandbox | None, knowledge: KnowledgeExport | None) -> ToolFactory:
    """A factory giving ``run_code`` to scopes with ``code`` (none when no sandbox can run here)."""

    def build(scope: Scope) -> list[Tool]:
        if not scope.code or sandbox is None:
            return []
        return [RunCode(sandbox, scope, knowledge)]

    return build


__all__ = ["CodeLimits", "CodeResult", "Isolation", "KnowledgeExport", "RunCode", "Sandbox", "code_tools", "detect"]
