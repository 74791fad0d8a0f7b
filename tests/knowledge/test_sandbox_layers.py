"""run_code's layers, each alone, against a script that first switches the audit hook off.

The script finds the hook through ``gc`` and overwrites the ``refuse`` of its closure with a no-op,
as an attacker would (no test switch). Then it tries what a script must never do (probes): connect to
a Unix socket the test listens on (world-writable, like PostgreSQL's), read another run's export,
see ``/run``, reach a TCP or UDP port on the host, write a file, fork, start a thread, signal the
server. Each layer runs alone (plus the bypassed hook), so that one layer cannot hide another: every
probe must be stopped by each layer that claims to stop it (docs/SECURITY.md), and by all of them
together. A control run with no layer at all shows that each probe does succeed when nothing stops it.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from assistant.engine.sandbox import LAYERS, CodeLimits, Isolation, Sandbox

BYPASS = """
import gc
for f in gc.get_objects():
    if type(f).__name__ == "function" and f.__name__ == "hook" and f.__closure__:
        for name, cell in zip(f.__code__.co_freevars, f.__closure__):
            if name == "refuse":
                cell.cell_contents = lambda message: None
"""

# name -> (code run with the host's paths and ports, the layers that stop it each on its own)
PROBES: dict[str, tuple[str, set[str]]] = {
    "unix socket": (
        "s = socket.socket(socket.AF_UNIX)\ns.settimeout(2)\ns.connect({unix!r})",
        {"namespaces", "seccomp"},
    ),
    "another run's export": ("open({other!r}).read()", {"namespaces", "uid", "landlock"}),
    "the host's /run": ("os.stat({run!r})", {"namespaces"}),
    "the project's files": ("open({project!r}).read()", {"namespaces", "landlock"}),
    "tcp": ("socket.create_connection(('127.0.0.1', {tcp}), timeout=2).close()", {"namespaces", "seccomp", "landlock"}),
    "udp": (
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp}))",
        {"namespaces", "seccomp"},
    ),
    "write a file": ("open(os.path.join({writable!r}, 'escape.txt'), 'w').close()", {"namespaces", "landlock"}),
    "write to the export": ("open('doc.txt', 'a').close()", {"namespaces", "uid", "landlock"}),
    "fork": ("pid = os.fork()\nif pid == 0: os._exit(0)\nos.waitpid(pid, 0)", {"seccomp", "nproc"}),
    "thread": ("t = threading.Thread(target=lambda: None)\nt.start()\nt.join()", {"seccomp", "nproc"}),
    "signal the server": ("os.kill({server}, 0)", {"namespaces", "seccomp", "uid", "landlock"}),
}
NETWORK = {"unix socket", "tcp", "udp"}
# A layer tested alone, with what it needs to mean anything: the process limit binds a non-root user only.
ALONE = {
    "namespaces": {"namespaces"},
    "seccomp": {"seccomp"},
    "uid": {"uid"},
    "landlock": {"landlock"},
    "nproc": {"nproc", "uid"},
}


@dataclass
class Host:
    """What the probes aim at, all opened by the test."""

    unix: str
    other: str
    run: str
    project: str
    tcp: int
    udp: int
    writable: str
    server: int
    sockets: tuple[socket.socket, socket.socket, socket.socket]


@pytest.fixture
def host(isolation: Isolation) -> Iterator[Host]:
    base = Path(tempfile.mkdtemp(prefix="probe-"))
    os.chmod(base, 0o755)
    writable = base / "writable"
    writable.mkdir()
    os.chmod(writable, 0o1777)
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(base / "service.sock"))
    os.chmod(base / "service.sock", 0o777)  # world-writable, like /run/postgresql/.s.PGSQL.5432
    unix.listen(5)
    unix.settimeout(0.2)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(5)
    tcp.settimeout(0.2)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.2)
    other = Sandbox(CodeLimits(), isolation)  # another organisation's run, with every layer
    with other.workdir() as other_root:
        (other_root / "secret.txt").write_text("another organisation's export")
        other.seal(other_root)
        yield Host(
            unix=str(base / "service.sock"),
            other=str(other_root / "secret.txt"),
            run="/run/postgresql" if os.path.exists("/run/postgresql") else "/run",
            project=str(django_settings.BASE_DIR / "manage.py"),
            tcp=tcp.getsockname()[1],
            udp=udp.getsockname()[1],
            writable=str(writable),
            server=os.getpid(),
            sockets=(unix, tcp, udp),
        )
    for s in (unix, tcp, udp):
        s.close()
    for leftover in writable.iterdir():
        leftover.unlink()
    writable.rmdir()
    (base / "service.sock").unlink()
    base.rmdir()


def attack(host: Host) -> str:
    """The script: bypass the hook, then try each probe and print whether it went through."""
    lines = [BYPASS, "import os, socket, threading"]
    fields = {k: v for k, v in vars(host).items() if k != "sockets"}
    for name, (code, _) in PROBES.items():
        body = "\n".join("    " + line for line in code.format(**fields).splitlines())
        lines.append(f"try:\n{body}\n    print({name!r} + '|through')\nexcept BaseException as e:")
        lines.append(f"    print({name!r} + '|stopped: ' + type(e).__name__)")
    return "\n".join(lines)


async def probe(isolation: Isolation, layers: set[str], host: Host) -> dict[str, str]:
    box = Sandbox(CodeLimits(cpu_seconds=5, wall_seconds=20, memory_mb=256), isolation, layers=frozenset(layers))
    with box.workdir() as root:
        (root / "doc.txt").write_text("invoice")
        box.seal(root)
        result = await box.run(attack(host), root)
    assert result.exit_code == 0, result.stderr
    assert not result.refusals, "the hook must have been switched off by the script"
    outcome = dict(line.split("|", 1) for line in result.stdout.splitlines())
    assert set(outcome) == set(PROBES), result.stdout
    if "landlock" in layers and result.landlock_abi == 0:
        pytest.skip("this kernel has no Landlock")
    return outcome


def reached(host: Host) -> set[str]:
    """Which of the test's sockets a script reached (seen from the test's side, not the script's)."""
    found = set()
    for name, sock in (("unix socket", host.sockets[0]), ("tcp", host.sockets[1])):
        try:
            sock.accept()[0].close()
            found.add(name)
        except TimeoutError:
            pass
    try:
        host.sockets[2].recv(16)
        found.add("udp")
    except TimeoutError:
        pass
    return found


async def test_the_control_run_shows_every_probe_goes_through_when_nothing_stops_it(
    isolation: Isolation, host: Host
) -> None:
    outcome = await probe(isolation, {"hook"}, host)
    assert outcome == dict.fromkeys(PROBES, "through")
    assert reached(host) == {"unix socket", "tcp", "udp"}


@pytest.mark.parametrize("layer", sorted(ALONE))
async def test_each_layer_alone_stops_what_it_claims_to(isolation: Isolation, host: Host, layer: str) -> None:
    outcome = await probe(isolation, ALONE[layer] | {"hook"}, host)
    claimed = {name for name, (_, stoppers) in PROBES.items() if layer in stoppers}
    assert claimed
    # A datagram to 127.0.0.1 in a new network namespace goes to that namespace's own loopback: what
    # counts for the sockets is whether the test's side received anything.
    assert {name for name in claimed - NETWORK if outcome[name] == "through"} == set()
    assert not reached(host) & claimed
    if layer in PROBES["write a file"][1]:
        assert not list(Path(host.writable).iterdir())


async def test_all_layers_together_stop_every_probe(isolation: Isolation, host: Host) -> None:
    outcome = await probe(isolation, set(LAYERS), host)
    assert {name for name, what in outcome.items() if what == "through"} == set()
    assert not reached(host)
    assert not list(Path(host.writable).iterdir())
