"""Which isolation this machine gives ``run_code``'s children (``detect``), probed once per process.

A child is started with every layer (``Sandbox.probe``); where bubblewrap, seccomp or the interpreter's own
files are missing, ``Isolation.missing`` names it and ``run_code`` is not offered at all.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import seccomp
from .sandbox import SYSTEM_FILES, UID_BASE, CodeLimits, Isolation, Sandbox

_RUNTIME_PROBE = (
    "import json, sys, sysconfig; print(json.dumps([sys.path, sysconfig.get_config_var('MULTIARCH') or '']))"
)


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
    paths += [os.path.realpath("/lib64") if not os.path.islink("/lib64") else "/lib64", *SYSTEM_FILES]
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


__all__ = ["detect"]
