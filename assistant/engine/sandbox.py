"""``run_code``: a Python script run in a separate, read-only, offline process.

What a child gets, layer by layer (``Sandbox.isolation`` says which layers this machine gives):

- a separate process started with ``python -I -S -B`` (no site-packages, no environment, no bytecode
  written), its own session so the whole group is killed at the wall-time limit;
- a new user and network namespace (``unshare -rn``) when the machine allows it: no network interface
  but a loopback that is down;
- when the server runs as root: the unprivileged ``nobody`` user, the exported files readable through
  their group only;
- ``sandbox_child``: resource limits (CPU, memory, no file may grow, no new process), a Landlock
  ruleset when the kernel has one (read-only view of the export and Python's library, no TCP), and an
  audit hook that refuses writes, reads elsewhere, sockets and processes with a message for the agent.

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
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .errors import ToolError
from .events import Action, Source
from .scope import Scope
from .tools import Document, Tool, ToolFactory, ToolOutcome
from .types import ToolSpec

NOBODY = 65534
REFUSED = "run_code refused: "
_MARK = "\x00sandbox "
_CHILD_SOURCE = Path(__file__).with_name("sandbox_child.py")
_SYSTEM_DIRS = ["/usr/lib", "/lib", "/lib64", "/usr/lib64", "/usr/share/zoneinfo"]
_SYSTEM_FILES = ["/etc/ld.so.cache", "/etc/localtime", "/dev/null", "/dev/urandom"]


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
    """The process-level isolation this machine gives a child (the child adds limits, Landlock, hook)."""

    python: str
    namespace: bool
    user: int | None

    def describe(self) -> list[str]:
        layers = ["separate process, python -I -S, resource limits, audit hook"]
        layers.append(
            "new network namespace (no network)" if self.namespace else "no network namespace (unshare unavailable)"
        )
        if self.user is not None:
            layers.append(f"unprivileged user {self.user}")
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


def _probe(cmd: list[str], user: int | None) -> bool:
    kwargs: dict[str, Any] = {"user": user, "group": user, "extra_groups": []} if user is not None else {}
    try:
        done = subprocess.run(
            cmd, capture_output=True, timeout=10, check=False, env={"PATH": "/usr/bin:/bin"}, **kwargs
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.cache
def detect(python: str | None = None) -> Isolation | None:
    """The best isolation available here, or None where no child can be started safely (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    candidates = [python] if python else [getattr(sys, "_base_executable", sys.executable), "/usr/bin/python3"]
    candidates = [c for c in dict.fromkeys(candidates) if c and os.path.exists(c)]
    unshare = shutil.which("unshare")
    root = os.geteuid() == 0
    users: list[int | None] = [NOBODY, None] if root else [None]
    for user in users:
        for py in candidates:
            if user is not None and not _world_executable(py):
                continue
            if unshare and _probe([unshare, "-rn", py, "-I", "-S", "-c", "pass"], user):
                return Isolation(py, True, user)
            if _probe([py, "-I", "-S", "-c", "pass"], user):
                return Isolation(py, False, user)
    return None


class Sandbox:
    """Runs scripts in child processes under ``limits``; ``audit_hook`` off only in tests of the kernel layers."""

    def __init__(
        self, limits: CodeLimits, isolation: Isolation, *, audit_hook: bool = True, landlock: bool = True
    ) -> None:
        self.limits = limits
        self.isolation = isolation
        self.audit_hook = audit_hook
        self.landlock = landlock

    @contextlib.contextmanager
    def workdir(self) -> Iterator[Path]:
        """A fresh directory for an export, readable by the child only, removed afterwards."""
        base = Path(tempfile.mkdtemp(prefix="run_code-"))
        try:
            os.chmod(base, 0o711)  # the child may traverse it, not list it
            root = base / "kb"
            root.mkdir()
            yield root
        finally:
            for d, _, _ in os.walk(base):
                with contextlib.suppress(OSError):
                    os.chmod(d, 0o700)
            shutil.rmtree(base, ignore_errors=True)

    def seal(self, root: Path) -> None:
        """Make the export read-only for the child: group ``nobody`` when it runs as nobody, else read-only modes."""
        user = self.isolation.user
        for d, _dirs, files in os.walk(root, topdown=False):
            for name in files:
                p = os.path.join(d, name)
                if user is not None:
                    os.chown(p, 0, user)
                os.chmod(p, 0o440 if user is not None else 0o444)
            if user is not None:
                os.chown(d, 0, user)
            os.chmod(d, 0o550 if user is not None else 0o555)

    def command(self, root: Path) -> list[str]:
        cfg = {
            "root": str(root),
            "cpu_seconds": self.limits.cpu_seconds,
            "memory_bytes": self.limits.memory_mb * 1024 * 1024,
            "no_processes": True,
            "landlock": self.landlock,
            "audit_hook": self.audit_hook,
            "system_dirs": _SYSTEM_DIRS,
            "system_files": _SYSTEM_FILES,
        }
        child = [self.isolation.python, "-I", "-S", "-B", "-c", _CHILD_SOURCE.read_text(), json.dumps(cfg)]
        if self.isolation.namespace:
            unshare = shutil.which("unshare") or "unshare"
            return [unshare, "-rn", *child]
        return child

    async def run(self, code: str, root: Path) -> CodeResult:
        """Run ``code`` with ``root`` (already sealed) as its working directory."""
        user = self.isolation.user
        kwargs: dict[str, Any] = {"user": user, "group": user, "extra_groups": []} if user is not None else {}
        proc = await asyncio.create_subprocess_exec(
            *self.command(root),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=str(root),
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            start_new_session=True,
            **kwargs,
        )
        cap = self.limits.max_output_chars * 4
        over: list[str] = []

        async def drain(stream: asyncio.StreamReader | None, sink: bytearray) -> None:
            assert stream is not None
            while chunk := await stream.read(65536):
                sink += chunk
                if len(sink) > cap:
                    over.append("output")
                    _kill(proc)
                    return

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
