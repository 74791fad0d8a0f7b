"""The live chat: one websocket per open conversation page, pushing HTML fragments htmx swaps in.

Thin by design: it authorises, joins groups (``runs.groups``), and hands events to ``live.LiveRun``,
which follows each run (``runs.follow``) and renders what changed. Stop and new messages are HTTP posts;
the page sends two things only, as JSON:

- ``{"state": [<run hex>, …]}`` on each (re)connect: the runs it shows as running. Each is followed again, and
  its lease says whether its process is alive (``runs.leases.fail_if_dead``): a dead one is failed and shown so.
  While runs are followed, their leases are checked every ``RUNS_HEARTBEAT_SECONDS`` the same way.
- ``{"follow_agent": {"run": <hex>, "agent": <agent id>}}`` (or ``null``) when its agent panel opens (or closes):
  that agent's panel body is pushed with each change.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Coroutine
from typing import Any, cast
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.utils import translation

from assistant.runs import leases, local
from assistant.runs.groups import conversation_group, run_group
from assistant.runs.messages import ConversationDeleted, ConversationRun, RunEvent, RunFinished, RunMessage
from assistant.telemetry import setup as telemetry

from . import live

CLOSE_SIGN_IN = 4401  # not signed in
CLOSE_NOT_FOUND = 4404  # not a conversation of this user: the same answer as for one that does not exist
CLOSE_DELETED = 4410  # its owner deleted the conversation (in this tab or another one)
PUSH_INTERVAL = 0.01  # seconds between two pushes to one page, at most 100 a second
PROGRESS_INTERVAL = 0.1  # seconds between two pushes of agents' progress (rounds, actions, cost) to one page
MAX_STATE_RUNS = 50  # runs a page may ask about in one message


class ConversationConsumer(AsyncWebsocketConsumer):
    """``/ws/c/<pk>/?lang=fr&running=<run hex>,…``: the runs of one conversation, live."""

    conversation_id: int
    language: str

    async def connect(self) -> None:
        self.runs: dict[str, live.LiveRun] = {}
        self.joined: set[str] = set()
        self.listening: set[str] = set()  # runs whose messages this page hears in this process (``runs.local``)
        # Per run, the messages heard while it is read or caught up from the database: applied after, in order.
        self.held: dict[str, list[RunMessage]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.pushing: asyncio.Task[None] | None = None
        self.watching: asyncio.Future[None] | None = None
        self.last_push = 0.0
        self.last_progress = 0.0
        self.progress_later: asyncio.TimerHandle | None = None
        self.conversation_id = 0
        self.followed: tuple[str, str] | None = None  # (run hex, agent id) of the agent panel the page shows
        # Accept, then close with a code: a refused handshake looks like a network failure, which
        # htmx would retry forever.
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_SIGN_IN)
            return
        pk = int(self.scope["url_route"]["kwargs"]["pk"])
        if await database_sync_to_async(live.find_conversation)(user, pk) is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.conversation_id = pk
        telemetry.count_connection(1)  # ``assistant.chat.connections``: taken back in ``disconnect``
        query = parse_qs(self.scope.get("query_string", b"").decode())
        self.language = _language(query.get("lang", [""])[0])
        await self._join(conversation_group(pk))
        # The runs the page showed as running (one may have ended since) and those running now.
        shown = [r for r in ",".join(query.get("running", [])).split(",") if r]
        for run_id in dict.fromkeys(shown + await database_sync_to_async(live.running_runs)(pk)):
            await self._follow(run_id)
        self.watching = asyncio.ensure_future(self._watch_leases())

    async def disconnect(self, code: int) -> None:
        if self.conversation_id:
            telemetry.count_connection(-1)
        if self.pushing is not None:
            self.pushing.cancel()
        if self.progress_later is not None:
            self.progress_later.cancel()
        if self.watching is not None:
            self.watching.cancel()
        for task in self.tasks:
            task.cancel()
        for run_id in list(self.listening):
            self._unlisten(run_id)
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels closes stale database connections before each message, a hop to the one thread
        # that runs database code, which is busy saving steps while runs stream. Live events touch
        # no database (a catch-up goes through database_sync_to_async, which closes them itself),
        # and a page receives hundreds a second from a fast model: they skip that hop.
        if message["type"] in {"run.event", "run.finished"}:
            self._heard(cast(RunMessage, message))  # the run groups carry those only (``runs.groups``)
        else:
            await super().dispatch(message)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """What the page asks: the state of the runs it shows as running, or to follow one agent's panel."""
        if not self.conversation_id:
            return
        try:
            message = json.loads(text_data or "")
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if "follow_agent" in message:
            await self._follow_agent(message["follow_agent"])
        state = message.get("state")
        if isinstance(state, list):
            for run_id in [r for r in state if isinstance(r, str)][:MAX_STATE_RUNS]:
                await self._check_lease(run_id)
                await self._follow(run_id)

    async def _follow_agent(self, target: object) -> None:
        self.followed = None
        if not isinstance(target, dict):
            return
        run_id, agent_id = target.get("run"), target.get("agent")
        if not isinstance(run_id, str) or not isinstance(agent_id, str) or len(agent_id) > 40:
            return
        self.followed = (run_id, agent_id)
        run = self.runs.get(run_id)
        if run is not None:  # what happened since the panel was read; a finished run's panel is already final
            run.dirty.add("panel")
            self._schedule_push()

    def _followed_in(self, run_id: str) -> str | None:
        return self.followed[1] if self.followed is not None and self.followed[0] == run_id else None

    # Group messages --------------------------------------------------------------------------

    async def conversation_run(self, message: ConversationRun) -> None:
        """A run started in this conversation (in this tab or another one)."""
        await self._follow(message["run"])

    async def conversation_deleted(self, message: ConversationDeleted) -> None:
        """The conversation was deleted: nothing more of it reaches this page."""
        for run in self.runs.values():
            run.dirty.clear()
        self.runs.clear()
        for run_id in list(self.listening):
            self._unlisten(run_id)
        if self.pushing is not None:
            self.pushing.cancel()
        if self.progress_later is not None:
            self.progress_later.cancel()
        for group in list(self.joined):
            await self._leave(group)
        await self.close(code=CLOSE_DELETED)

    def _heard(self, message: RunMessage) -> None:
        """One of a followed run's messages, in the publisher's call (``runs.local``) or from the channel layer:
        an event is applied at once and its push scheduled; a gap is filled from the database first, and so is the
        run's end, the messages heard meanwhile held and applied after, in order."""
        run_id = message["run"]
        held = self.held.get(run_id)
        if held is not None:
            held.append(message)
            return
        run = self.runs.get(run_id)
        if run is None:
            return
        if message["type"] == "run.finished":
            self.held[run_id] = []
            self._start(run_id, self._run_finished(run_id, run, message))
        elif run.apply(message):
            self._schedule_push()
        else:
            self.held[run_id] = []
            self._start(run_id, self._catch_up(run, message))

    def _start(self, run_id: str, work: Coroutine[Any, Any, None]) -> None:
        """``work`` on a task of its own; what the run's messages it holds meanwhile say is applied after it."""

        async def then_held() -> None:
            try:
                await work
            finally:
                for message in self.held.pop(run_id, []):
                    self._heard(message)

        task = asyncio.ensure_future(then_held())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _catch_up(self, run: live.LiveRun, message: RunEvent) -> None:
        await run.catch_up(message)
        self._schedule_push()

    async def _run_finished(self, run_id: str, run: live.LiveRun, finished: RunFinished | None = None) -> None:
        del self.runs[run_id]
        await self._stop_listening(run_id)
        if self.pushing is not None:
            await asyncio.shield(self.pushing)  # what it renders must not arrive after the final state
        with translation.override(self.language):
            text = run.render_text()
        if text:  # its last words now: the database's thread may be busy with other runs' steps
            await self.send(text_data=text)
        await database_sync_to_async(run.refresh_finished)(finished)
        with translation.override(self.language):
            html = run.render_run(self._followed_in(run_id))
        await self.send(text_data=html)

    # Internals -------------------------------------------------------------------------------

    async def _follow(self, run_id: str) -> None:
        try:
            run_id = uuid.UUID(hex=run_id).hex
        except ValueError:
            return
        if run_id in self.runs:
            return
        if run_id in self.listening:
            return  # being read
        await self._check_lease(run_id)
        # Listen before reading: whatever happens after the read is then heard (held until it is read).
        self.held[run_id] = []
        await self._listen(run_id)
        try:
            run = await database_sync_to_async(live.LiveRun.load)(run_id, self.conversation_id, self.language)
        except BaseException:
            del self.held[run_id]
            await self._stop_listening(run_id)
            raise
        if run is None or run.finished:
            del self.held[run_id]
            await self._stop_listening(run_id)
            if run is not None:
                # The page may show it running, or not at all (it started and ended in another tab).
                await self._send_finished(run_id, with_turn=True)
                await self._send_finished(run_id, with_turn=False)
            return
        self.runs[run_id] = run
        run.dirty |= {"turn", "work", "answer"}
        for message in self.held.pop(run_id):
            self._heard(message)
        self._schedule_push()

    async def _send_finished(self, run_id: str, *, with_turn: bool) -> None:
        html = await database_sync_to_async(live.render_finished)(run_id, self.language, with_turn=with_turn)
        await self.send(text_data=html)

    def _schedule_push(self) -> None:
        # One push at a time, at most one per PUSH_INTERVAL: a burst of events (a fast model writes
        # hundreds of words a second) goes out as one fragment, rendered once. After a pause, the
        # next event goes out on the loop's next turn. Agents' progress (their rounds, actions and
        # cost) goes out at most once per PROGRESS_INTERVAL: with many runs streaming on one loop,
        # rendering those lines at every step of every agent took most of its time, and delayed the
        # answers' text behind them.
        if self.pushing is None or self.pushing.done():
            wait = self.last_push + PUSH_INTERVAL - asyncio.get_running_loop().time()
            self.pushing = asyncio.ensure_future(self._push(wait))

    async def _push(self, wait: float) -> None:
        if wait > 0:
            await asyncio.sleep(wait)
        loop = asyncio.get_running_loop()
        now = loop.time()
        progress = now >= self.last_progress + PROGRESS_INTERVAL
        if progress and any(run.progress_pending for run in self.runs.values()):
            self.last_progress = now
        with translation.override(self.language):
            html = "".join(
                run.render_changes(self._followed_in(run_id), progress=progress) for run_id, run in self.runs.items()
            )
        if html:
            self.last_push = now  # a push that sent nothing (progress left for later) holds the next one up by nothing
            await self.send(text_data=html)
        if not progress and self.progress_later is None and any(run.progress_pending for run in self.runs.values()):
            self.progress_later = loop.call_at(self.last_progress + PROGRESS_INTERVAL, self._push_progress)

    def _push_progress(self) -> None:
        self.progress_later = None
        self._schedule_push()

    async def _check_lease(self, run_id: str) -> None:
        """A running run of this conversation whose process died is failed now, and every page following it told."""
        try:
            pk = uuid.UUID(hex=run_id)
        except ValueError:
            return
        if leases.executes_here(pk):
            return  # this process executes it: alive (with 50 pages following runs, 10 reads a second spared)
        if await database_sync_to_async(_dead_run_of)(pk, self.conversation_id):
            await leases.announce_failed([pk])

    async def _watch_leases(self) -> None:
        """While this page follows running runs, their leases say every heartbeat whether their processes live."""
        while True:
            await asyncio.sleep(max(settings.RUNS_HEARTBEAT_SECONDS, 0.5))
            for run_id in list(self.runs):
                with contextlib.suppress(Exception):  # the database away for a moment: the next round tries again
                    await self._check_lease(run_id)

    async def _listen(self, run_id: str) -> None:
        """Hear the run's messages: in this process's publisher's call, and from the channel layer unless every run
        executes in this process (``runs.local``)."""
        local.listen(run_id, self._heard)
        self.listening.add(run_id)
        if not local.in_process():
            await self._join(run_group_of(run_id))

    def _unlisten(self, run_id: str) -> None:
        local.unlisten(run_id, self._heard)
        self.listening.discard(run_id)

    async def _stop_listening(self, run_id: str) -> None:
        self._unlisten(run_id)
        if run_group_of(run_id) in self.joined:
            await self._leave(run_group_of(run_id))

    async def _join(self, group: str) -> None:
        await self.channel_layer.group_add(group, self.channel_name)
        self.joined.add(group)

    async def _leave(self, group: str) -> None:
        await self.channel_layer.group_discard(group, self.channel_name)
        self.joined.discard(group)


def _dead_run_of(run_id: uuid.UUID, conversation_id: int) -> bool:
    """Whether this running run of the conversation has a dead process, failed by this call (``leases.fail_if_dead``)."""
    return leases.fail_if_dead(run_id, conversation_id=conversation_id)


def run_group_of(run_hex: str) -> str:
    return run_group(uuid.UUID(hex=run_hex))


def _language(requested: str) -> str:
    try:
        return translation.get_supported_language_variant(requested or settings.LANGUAGE_CODE)
    except LookupError:
        return settings.LANGUAGE_CODE
