"""run_code: a read-only view of the caller's own knowledge bases, no writes, no network, no processes, limits.

Scripts are what a model could send. The audit hook answers with a message for the agent; a second
set of tests leaves the hook out and checks that the kernel layers (bubblewrap's namespaces, seccomp,
Landlock, the run's own user, resource limits) hold; test_sandbox_layers.py tests each layer alone
against a script that switches the hook off itself.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from pytest_django import Settings

from assistant.engine.errors import ToolError
from assistant.engine.run_code import RunCode
from assistant.engine.sandbox import LAYERS, UID_BASE, UID_COUNT, CodeLimits, Sandbox
from assistant.engine.sandbox_probe import detect
from assistant.engine.scope import Scope
from assistant.knowledge.models import Document, KnowledgeBase
from assistant.runs.execution import toolbox_for
from tests.knowledge.knowledge_support import SECRET, Org, two_orgs

pytestmark = pytest.mark.django_db(transaction=True)

RETURN = "return what you found"


@pytest.fixture
def code_on(settings: Settings) -> None:
    settings.RUN_CODE_ENABLED = True
    settings.RUN_CODE_CPU_SECONDS = 2
    settings.RUN_CODE_WALL_SECONDS = 8  # the CPU limit (2 s) comes first even on a loaded machine
    settings.RUN_CODE_MEMORY_MB = 256


@pytest.fixture
async def orgs(code_on: None) -> tuple[Org, Org]:
    def build() -> tuple[Org, Org]:
        a, b = two_orgs()
        other = KnowledgeBase.objects.create(organisation=a.org, slug="contrats", name="Contrats")
        Document.objects.create(
            knowledge_base=other, title="Contract C-1", text="Penalties: three times the legal rate."
        )
        return a, b

    return await sync_to_async(build)()


def run_code(org: Org, scope: Scope | None = None) -> RunCode:
    tools = {t.spec.name: t for t in toolbox_for(org.org.pk).tools_for(scope or Scope(("factures",), code=True))}
    tool = tools["run_code"]
    assert isinstance(tool, RunCode)
    return tool


async def output(tool: RunCode, code: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((await tool.run({"code": code})).content)
    return result


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP port open on the host's loopback: a script must not reach it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(5)
    sock.settimeout(0.2)
    yield sock
    sock.close()


def nobody_connected(sock: socket.socket) -> bool:
    try:
        sock.accept()[0].close()
    except TimeoutError:
        return True
    return False


# What a script can do --------------------------------------------------------------------------------


async def test_a_script_reads_its_own_knowledge_bases(orgs: tuple[Org, Org]) -> None:
    a, _ = orgs
    script = """
import json, os
index = json.load(open("index.json"))
print(sorted(os.listdir(".")))
print(len(index), sorted({d["kb"] for d in index}))
first = index[0]
print(first["title"], "|", open(first["path"]).read())
"""
    tool = run_code(a)
    result = await tool.run({"code": script})
    data = json.loads(result.content)
    lines = data["stdout"].splitlines()
    assert lines[0] == "['factures', 'index.json']"
    assert lines[1] == "4 ['factures']"
    assert lines[2] == f"{a.docs[0].title} | {a.docs[0].text}"
    assert data["exit_code"] == 0
    # What the script read counts as read.
    assert [s.id for s in result.sources] == [a.docs[0].public_id]


async def test_the_index_gives_a_document_s_title_in_its_other_languages(orgs: tuple[Org, Org]) -> None:
    a, _ = orgs
    translated = a.docs[1]
    translated.translations = {"fr": {"title": "Facture traduite"}, "de": {}}
    await sync_to_async(translated.save)()
    script = "import json; print(json.dumps({d['id']: d.get('titles') for d in json.load(open('index.json'))}))"
    titles = json.loads((await output(run_code(a), script))["stdout"])
    assert titles[translated.public_id] == {"fr": "Facture traduite"}  # a language without a title left out
    assert titles[a.docs[0].public_id] is None  # no other language: no titles


async def test_only_the_scopes_bases_are_exported(orgs: tuple[Org, Org]) -> None:
    a, _ = orgs
    dump = "import os\nfor d, _, fs in os.walk('.'):\n    for f in fs: print(open(os.path.join(d, f)).read())"
    text = (await output(run_code(a), dump))["stdout"]
    assert "Turbine maintenance" in text
    assert "Penalties" not in text, "a base of the organisation that is not in the scope"
    assert SECRET not in text and "Zorglub" not in text, "another organisation's base of the same slug"
    both = (await output(run_code(a, Scope(("factures", "contrats"), code=True)), dump))["stdout"]
    assert "Penalties" in both and SECRET not in both
    none = await output(run_code(a, Scope(code=True)), "import os; print(os.listdir('.'), open('index.json').read())")
    assert none["stdout"].strip() == "['index.json'] []"


async def test_the_export_is_removed_after_the_run(orgs: tuple[Org, Org]) -> None:
    a, _ = orgs
    cwd = (await output(run_code(a), "import os; print(os.getcwd())"))["stdout"].strip()
    assert cwd.endswith("/kb") and not Path(cwd).exists() and not Path(cwd).parent.exists()


async def test_errors_show_the_scripts_own_traceback(orgs: tuple[Org, Org]) -> None:
    a, _ = orgs
    data = await output(run_code(a), "print('before')\n1 / 0")
    assert data["exit_code"] == 1 and data["stdout"] == "before\n"
    assert "ZeroDivisionError" in data["stderr"] and '"<run_code>", line 2' in data["stderr"]
    assert "<string>" not in data["stderr"]


# What it cannot do: each refusal says so, and tells the agent to return what it found -----------------

ESCAPES = {
    "traversal": "print(open('../../../../etc/passwd').read())",
    "traversal through a base": "print(open('factures/../../../../../etc/hostname').read())",
    "absolute path": "print(open('/etc/passwd').read())",
    "the project's files": f"print(open({str(django_settings.BASE_DIR / 'assistant' / 'settings.py')!r}).read())",
    "list the root": "import os; print(os.listdir('/'))",
    "list the parent": "import os; print(os.listdir('..'))",
    "proc": "print(open('/proc/self/environ').read())",
}
WRITES = {
    "new file": "open('notes.txt', 'w').write('x')",
    "append to a document": "open('index.json', 'a').write('x')",
    "tmp": "open('/tmp/run_code_escape.txt', 'w').write('x')",
    "pathlib": "import pathlib; pathlib.Path('/tmp/run_code_escape.txt').write_text('x')",
    "os.open": "import os; os.open('/tmp/run_code_escape.txt', os.O_CREAT | os.O_WRONLY)",
    "delete": "import os; os.remove('index.json')",
    "rename": "import os; os.rename('index.json', 'x.json')",
    "mkdir": "import os; os.mkdir('out')",
    "rmtree": "import shutil; shutil.rmtree('factures')",
    "symlink": "import os; os.symlink('/etc/passwd', 'link')",
    "chmod": "import os; os.chmod('index.json', 0o777)",
    "tempfile": "import tempfile; tempfile.mkstemp()",
}
PROCESSES = {
    "subprocess": "import subprocess; subprocess.run(['id'])",
    "os.system": "import os; os.system('id')",
    "fork": "import os; os.fork()",
    "ctypes": "import ctypes; ctypes.CDLL(None)",
}


@pytest.mark.parametrize("script", ESCAPES.values(), ids=ESCAPES.keys())
async def test_reading_outside_its_bases_is_refused(orgs: tuple[Org, Org], script: str) -> None:
    a, _ = orgs
    with pytest.raises(ToolError, match="is not allowed") as refused:
        await run_code(a).run({"code": script})
    assert RETURN in str(refused.value) or "only your knowledge bases" in str(refused.value)
    assert "root:" not in str(refused.value)


@pytest.mark.parametrize("script", WRITES.values(), ids=WRITES.keys())
async def test_writes_are_refused_with_a_message_to_return_the_findings(orgs: tuple[Org, Org], script: str) -> None:
    a, _ = orgs
    with pytest.raises(ToolError, match=RETURN):
        await run_code(a).run({"code": "print('found: 3 invoices')\n" + script})
    assert not Path("/tmp/run_code_escape.txt").exists()


async def test_the_output_before_a_refusal_is_kept_in_the_message(orgs: tuple[Org, Org]) -> None:
    a, _ = orgs
    with pytest.raises(ToolError, match="Output before the refusal: found: 3 invoices"):
        await run_code(a).run({"code": "print('found: 3 invoices')\nopen('x', 'w')"})


@pytest.mark.parametrize("script", PROCESSES.values(), ids=PROCESSES.keys())
async def test_processes_and_native_code_are_refused(orgs: tuple[Org, Org], script: str) -> None:
    a, _ = orgs
    with pytest.raises(ToolError, match=r"not allowed|cannot start|not available"):
        await run_code(a).run({"code": script})


@pytest.mark.parametrize(
    "script",
    [
        "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)",
        "import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=2)",
        "import socket; socket.getaddrinfo('example.org', 80)",
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('8.8.8.8', 53))",
    ],
)
async def test_the_network_is_refused(orgs: tuple[Org, Org], listener: socket.socket, script: str) -> None:
    a, _ = orgs
    port = listener.getsockname()[1]
    with pytest.raises(ToolError, match="no network"):
        await run_code(a).run({"code": script.format(port=port)})
    assert nobody_connected(listener)


HOOK_OFF = """
import gc
for f in gc.get_objects():
    if type(f).__name__ == "function" and f.__name__ == "hook" and f.__closure__:
        for name, cell in zip(f.__code__.co_freevars, f.__closure__):
            if name == "refuse":
                cell.cell_contents = lambda message: None
"""


@pytest.fixture
def unix_listener() -> Iterator[tuple[str, socket.socket]]:
    """A world-writable Unix socket on the host's file system, like PostgreSQL's in /run/postgresql."""
    import tempfile

    base = tempfile.mkdtemp(prefix="service-")
    os.chmod(base, 0o755)
    path = os.path.join(base, ".s.PGSQL.5432")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(path)
    os.chmod(path, 0o777)
    sock.listen(5)
    sock.settimeout(0.2)
    yield path, sock
    sock.close()
    os.unlink(path)
    os.rmdir(base)


async def test_a_script_that_switches_the_hook_off_cannot_reach_a_unix_socket(
    orgs: tuple[Org, Org], unix_listener: tuple[str, socket.socket]
) -> None:
    a, _ = orgs
    path, sock = unix_listener
    script = (
        HOOK_OFF
        + f"""
import os, socket
print("sees /run:", os.path.exists("/run"), os.path.exists("/run/postgresql"))
s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect({path!r})
print("connected")
"""
    )
    data = await output(run_code(a), script)
    assert "connected" not in data["stdout"]
    assert data["stdout"].startswith("sees /run: False False"), data
    assert data["exit_code"] == 1
    assert nobody_connected(sock)


# Limits ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "note"),
    [
        ("while True: pass", "CPU-time limit"),
        ("import time; time.sleep(60)", "time limit"),
        ("x = bytearray(1024 * 1024 * 1024)", "memory limit"),
        ("while True: print('x' * 1000)", "printed too much"),
    ],
)
async def test_limits_end_a_script_and_say_which(orgs: tuple[Org, Org], script: str, note: str) -> None:
    a, _ = orgs
    data = await output(run_code(a), script)
    assert note in data["limit"]
    assert data["exit_code"] != 0


# The kernel layers, with the audit hook turned off ----------------------------------------------------


@pytest.fixture
def bare_sandbox() -> Iterator[tuple[Sandbox, Path]]:
    isolation = detect()
    assert isolation is not None, "run_code needs Linux"
    box = Sandbox(CodeLimits(cpu_seconds=2, wall_seconds=6, memory_mb=256), isolation, layers=LAYERS - {"hook"})
    with box.workdir() as root:
        (root / "factures").mkdir()
        (root / "factures" / "doc-1.txt").write_text("invoice")
        box.seal(root)
        yield box, root


async def test_without_the_hook_the_network_stays_cut(
    bare_sandbox: tuple[Sandbox, Path], listener: socket.socket
) -> None:
    box, root = bare_sandbox
    port = listener.getsockname()[1]
    result = await box.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)", root)
    assert result.exit_code == 1 and ("OSError" in result.stderr or "Error" in result.stderr)
    assert nobody_connected(listener)


async def test_without_the_hook_landlock_still_makes_everything_read_only(bare_sandbox: tuple[Sandbox, Path]) -> None:
    box, root = bare_sandbox
    box = Sandbox(box.limits, box.isolation, layers=frozenset({"landlock"}))  # Landlock alone
    probe = await box.run("print(open('factures/doc-1.txt').read())", root)
    if probe.landlock_abi == 0:
        pytest.skip("this kernel has no Landlock: only the audit hook and file permissions keep files read-only")
    assert probe.stdout == "invoice\n"
    for script in [
        "open('/tmp/run_code_escape.txt', 'w')",
        "open('factures/doc-1.txt', 'a')",
        "import os; os.remove('factures/doc-1.txt')",
        "open('/etc/passwd').read()",
        f"open({str(django_settings.BASE_DIR / 'manage.py')!r}).read()",
        "import os; os.listdir('/')",
    ]:
        result = await box.run(script, root)
        assert result.exit_code == 1 and "PermissionError" in result.stderr, script
    assert not Path("/tmp/run_code_escape.txt").exists()
    assert (root / "factures" / "doc-1.txt").read_text() == "invoice"


async def test_the_child_runs_unprivileged_when_the_server_is_root(bare_sandbox: tuple[Sandbox, Path]) -> None:
    box, root = bare_sandbox
    if os.geteuid() != 0:
        pytest.skip("the server is not root here: the child keeps the server's own user")
    assert box.isolation.uids
    result = await box.run("import os; print(os.getuid(), os.getgid())", root)
    uid, gid = map(int, result.stdout.split())
    assert UID_BASE <= uid < UID_BASE + UID_COUNT and gid == uid
    assert root.stat().st_gid == uid and root.stat().st_mode & 0o007 == 0, "the export is the run's only"
    with box.workdir() as second:
        box.seal(second)
        again = await box.run("import os; print(os.getuid())", second)
    assert int(again.stdout) != uid, "each run has a user of its own"
    # A root-only file inside the export (so Landlock would let it through) stays unreadable to the run.
    private = root / "factures" / "root-only.txt"
    os.chmod(root / "factures", 0o750)
    private.write_text("root only")
    os.chmod(private, 0o600)
    os.chmod(root / "factures", 0o550)
    result = await box.run("print(open('factures/root-only.txt').read())", root)
    assert result.exit_code == 1 and "PermissionError" in result.stderr
