"""Scaled out for real: PostgreSQL, Redis and Celery worker processes, all on 127.0.0.1.

These tests (marker ``postgres``) run in ``make test``'s PostgreSQL pytest run of their own, in a test
database of their own (``test_scale_<pid>``); their Redis keys start with ``test-scale-<pid>`` in
Redis database 13 (``SCALE_TEST_REDIS_URL``), so that developers running the suite at once never
share a queue, a group or a database. On SQLite they are deselected, and the run says so.

The workers are real ``celery worker`` processes started from the same settings, with a short lease
(0.5 s heartbeat, 2 s lease) so that a killed worker's run is failed quickly.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection, connections
from django.test import override_settings

from assistant.orgs.models import Organisation
from assistant.runs.models import Conversation, Lease, Run
from tests.chat.chat_support import Page, open_socket, signed_in
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]

REDIS_URL = os.environ.get("SCALE_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
PREFIX = f"test-scale-{os.getpid()}"
DEMO_PACE, DEMO_LATENCY = "0.002", "0.3"
TIMINGS = {"RUNS_HEARTBEAT_SECONDS": 0.5, "RUNS_LEASE_SECONDS": 2.0, "RUNS_QUEUE_SECONDS": 120.0}
WORKER_START_SECONDS = 90  # a loaded machine imports Django slowly


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    if "postgresql" in str(settings.DATABASES["default"]["ENGINE"]):
        settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = f"test_scale_{os.getpid()}"


def _forget_redis_keys() -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        for key in client.scan_iter(match=f"{PREFIX}*", count=1_000):
            client.delete(key)
    finally:
        client.close()


@pytest.fixture(scope="session")
def scaled(django_db_setup: None) -> Iterator[dict[str, str]]:
    """This process as a web server of the scaled set-up; returns the environment of its workers."""
    from assistant.workers import celery

    layers = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # As in the settings (what the workers run with), with this run's prefix.
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": 15}],
                "prefix": f"{PREFIX}:asgi",
                "capacity": 5_000,
            },
        }
    }
    override = override_settings(
        REDIS_URL=REDIS_URL,
        REDIS_PREFIX=PREFIX,
        CELERY_BROKER_URL=REDIS_URL,
        CHANNEL_LAYERS=layers,
        RUNS_EXECUTOR="celery",
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        **TIMINGS,
    )
    override.enable()
    celery.configure()
    _forget_redis_keys()
    s = connection.settings_dict
    auth = quote(s["USER"]) + (f":{quote(s['PASSWORD'])}" if s["PASSWORD"] else "")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "assistant.settings",
        "DATABASE_URL": f"postgres://{auth}@{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}",
        "REDIS_URL": REDIS_URL,
        "REDIS_PREFIX": PREFIX,
        "RUNS_EXECUTOR": "celery",
        "RUNS_WORKER_CONCURRENCY": "2",
        "DEMO_PACE": DEMO_PACE,
        "DEMO_LATENCY": DEMO_LATENCY,
        "PYTHONUNBUFFERED": "1",
        # Web server and workers share the stored files (the demo's table, uploads), as a deployment does.
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        **{k: str(v) for k, v in TIMINGS.items()},
    }
    try:
        yield env
    finally:
        override.disable()
        _forget_redis_keys()
        # The async tests' database work ran in asgiref's one thread: close its connection too, or the
        # test database cannot be dropped.
        asyncio.run(sync_to_async(connections.close_all)())


@dataclass
class Process:
    """A worker or beat process, with its log."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


class Processes:
    """Starts celery processes for the tests and stops them all at the end."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env = env
        self.folder = folder
        self.started: list[Process] = []

    def _start(self, name: str, args: list[str], ready: str) -> Process:
        log = self.folder / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "assistant.workers.celery", *args],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        process = Process(name, popen, log)
        self.started.append(process)

        def started() -> bool:
            if popen.poll() is not None:
                raise RuntimeError(f"{name} stopped before it started:\n{process.output()}")
            return ready in process.output()

        wait_until(started, lambda: f"{name} to start:\n{process.output()}", seconds=WORKER_START_SECONDS)
        return process

    def worker(self, name: str, concurrency: int = 2) -> Process:
        args = ["worker", "--hostname", f"{name}@%h", "--concurrency", str(concurrency), "--loglevel", "INFO"]
        return self._start(name, [*args, "--without-gossip", "--without-mingle", "--without-heartbeat"], " ready.")

    def beat(self) -> Process:
        schedule = self.folder / "beat-schedule"
        return self._start(
            "beat", ["beat", "--loglevel", "INFO", "--max-interval", "1", "-s", str(schedule)], "beat: Starting"
        )

    def stop_all(self) -> None:
        for process in self.started:
            process.stop()


@pytest.fixture(scope="session")
def processes(scaled: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    started = Processes(scaled, tmp_path_factory.mktemp("celery"))
    try:
        yield started
    finally:
        started.stop_all()


@pytest.fixture(scope="session")
def _pool(processes: Processes) -> list[Process]:
    return [processes.worker("alpha"), processes.worker("beta")]


@pytest.fixture
def workers(processes: Processes, _pool: list[Process]) -> list[Process]:
    """Two workers of two runs each, shared by the tests; one a test killed is replaced."""
    for i, worker in enumerate(_pool):
        if worker.popen.poll() is not None:
            _pool[i] = processes.worker(f"{worker.name}-{i}")
    return list(_pool)


# What the tests of a run on the workers share: the demo, a conversation of its user, the page that follows it ---------


@pytest.fixture(autouse=True)
def fresh_channel_layer(scaled: dict[str, str]) -> Iterator[None]:
    # The Redis layer keeps connections per event loop: one layer per test (each test has its loop).
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture
def demo(scaled: dict[str, str]) -> None:
    call_command("load_demo", verbosity=0)


async def new_conversation() -> Conversation:
    """A new conversation of the demo's user ``demo``."""
    user = await get_user_model().objects.aget(username="demo")
    org = await Organisation.objects.aget(slug="demo")
    return await Conversation.objects.acreate(organisation=org, user=user, title="A conversation")


@pytest.fixture
async def page(demo: None) -> AsyncIterator[Page]:
    """``demo`` signed in, with a new conversation's page open (its websocket, in English), closed after the test."""
    client, session = await signed_in()
    conversation = await new_conversation()
    opened = Page(client, conversation, await open_socket(f"/ws/c/{conversation.pk}/?lang=en", session))
    try:
        yield opened
    finally:
        await opened.close()


def executor_pid(run: Run) -> int:
    """The process id of the worker that holds (or held) ``run``'s lease: its executor is ``<host>:<pid>``."""
    return int(Lease.objects.get(run=run).executor.rsplit(":", 1)[1])
