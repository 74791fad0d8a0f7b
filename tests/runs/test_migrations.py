"""The models Conversation, Message, Run, Step and Lease moved to the ``runs`` app without their rows moving.

A database at the last migrations before the move (``chat.0003``, ``workers.0001``, ``schedules.0001``)
holding a run is migrated forward: the run, its conversation, messages, steps, lease and scheduled
execution are read back through the ``runs`` models, and the content types followed the models.
"""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from assistant.runs.models import Conversation, Lease, Message, Run, Step
from assistant.schedules.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("chat", "0003_conversation_deleted"), ("workers", "0001_initial"), ("schedules", "0001_initial")]


MOVED = {"conversation": ("chat", Conversation), "run": ("chat", Run), "message": ("chat", Message)}
MOVED |= {"step": ("chat", Step), "lease": ("workers", Lease)}


def _migrate(targets: list[tuple[str, str | None]]) -> MigrationExecutor:
    MigrationExecutor(connection).migrate(targets)
    return MigrationExecutor(connection)  # its loader reads what is applied now


def test_a_run_saved_before_the_move_is_read_after_it() -> None:
    old = _migrate([*BEFORE, ("runs", None)]).loader.project_state(BEFORE).apps
    User = old.get_model("auth", "User")
    user = User.objects.create(username="before")
    org = old.get_model("orgs", "Organisation").objects.create(name="Before", slug="before")
    conversation = old.get_model("chat", "Conversation").objects.create(organisation=org, user=user, title="Old")
    run = old.get_model("chat", "Run").objects.create(
        conversation=conversation, organisation=org, user=user, model="demo-small", status="ok", answer="Old answer"
    )
    old.get_model("chat", "Message").objects.create(conversation=conversation, role="user", content="Q?", run=run)
    old.get_model("chat", "Step").objects.create(run=run, seq=1, kind="usage", data={"kind": "usage"})
    old.get_model("workers", "Lease").objects.create(run=run, executor="host:1", heartbeat=timezone.now())
    task = old.get_model("schedules", "ScheduledTask").objects.create(
        organisation=org, owner=user, name="Daily", prompt="p", model="demo-small", schedule="0 8 * * *", cost_cap_eur=1
    )
    old.get_model("schedules", "Execution").objects.create(task=task, run=run)
    # The content types as such a database has them: under the old apps.
    assert not ContentType.objects.filter(app_label="runs").exists()
    old_types = {model: ContentType.objects.get(app_label=app, model=model).pk for model, (app, _) in MOVED.items()}

    latest = MigrationExecutor(connection).loader.graph.leaf_nodes()
    executor = _migrate(latest)
    assert not executor.migration_plan(latest)  # fully migrated again

    moved = Run.objects.get(pk=run.pk)
    assert (moved.answer, moved.status, moved.conversation.title) == ("Old answer", "ok", "Old")
    assert [m.content for m in Message.objects.filter(run=moved)] == ["Q?"]
    assert [(s.seq, s.kind) for s in Step.objects.filter(run=moved)] == [(1, "usage")]
    assert Lease.objects.get(run=moved).executor == "host:1"
    assert Execution.objects.get(task__name="Daily").run == moved
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    # Permissions and admin history follow the models: the content types are the same rows, relabelled.
    ContentType.objects.clear_cache()
    for model, (_, cls) in MOVED.items():
        assert ContentType.objects.get_for_model(cls).pk == old_types[model]
    # (chat's own model since then, the conversation search's text, is the only one left there)
    left = ContentType.objects.filter(app_label__in=["chat", "workers"]).exclude(
        app_label="chat", model="conversationtext"
    )
    assert not left.exists()
