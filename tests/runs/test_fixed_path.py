"""What a run costs the database once, around its model calls: intake, the claim, what its execution starts from,
its end. Statement counts guard against round trips coming back (never timings: those are the benchmark's)."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assistant.budgets.ledger import CategoryLedger
from assistant.budgets.models import CategoryMonth, Reservation
from assistant.catalogue import snapshot
from assistant.engine.errors import RequestRefused
from assistant.engine.events import RunStatus
from assistant.engine.policy import plan_request
from assistant.engine.types import ClientTools, NamedTool, ToolCall, ToolSpec
from assistant.engine.types import Message as EngineMessage
from assistant.engine.usage import RunUsage
from assistant.knowledge.models import KnowledgeBase
from assistant.orgs.models import AgentProfile, Organisation, ReasoningLevel
from assistant.orgs.services import policy_for
from assistant.runs import execution, intake, leases, queue
from assistant.runs.models import Conversation, Lease, Message, Run
from assistant.runs.start import RunStart, history_of, read_start

# Transactional: the claim closes a connection left in a transaction (``close_old_connections``), as a test's is.
pytestmark = pytest.mark.django_db(transaction=True)

ASK = intake.Ask(text="Bimbamjob?", model="demo-small", level="rapide", resources=(), category="administration")


def _work(sent: CaptureQueriesContext) -> list[str]:
    """The statements sent, without the transactions' own (PostgreSQL's lazy commits add BEGIN, SET LOCAL, COMMIT)."""
    control = ("BEGIN", "COMMIT", "ROLLBACK", "SET LOCAL", "SAVEPOINT", "RELEASE SAVEPOINT")
    return [q["sql"] for q in sent if not q["sql"].upper().startswith(control)]


@pytest.fixture
def org(demo_data: None) -> Organisation:
    return Organisation.objects.get(slug="demo")


def _start(org: Organisation, ask: intake.Ask = ASK, **kwargs: Any) -> RunStart:
    return intake.create_run(get_user_model().objects.get(username="demo"), org, None, ask, **kwargs)


def _create(org: Organisation, ask: intake.Ask = ASK, **kwargs: object) -> Run:
    return _start(org, ask, **kwargs).run


def test_a_run_is_claimed_once_in_one_statement(org: Organisation) -> None:
    run = _create(org)
    with CaptureQueriesContext(connection) as sent:
        assert leases.claim_read(run.pk) is not None
    assert len(_work(sent)) == 1
    assert Lease.objects.get(run=run).executor == leases.executor_name()
    assert leases.claim_read(run.pk) is None  # held: another delivery of the run is not executed
    ended = _create(org, intake.Ask(text="Encore ?", model="demo-small", level="rapide", resources=()))
    Run.objects.filter(pk=ended.pk).update(status="ok")
    assert leases.claim_read(ended.pk) is None
    assert not Lease.objects.filter(run=ended).exists()


def test_intake_reads_the_category_once_and_its_start_carries_what_it_read_to_the_execution(
    org: Organisation,
) -> None:
    with CaptureQueriesContext(connection) as sent:
        start = _start(org)
    run = start.run
    categories = [q["sql"] for q in sent if q["sql"].startswith('SELECT "budgets_category"."id"')]
    assert len(categories) == 1
    assert start.policy == policy_for(org)
    assert isinstance(start.ledger, CategoryLedger)
    assert start.ledger.category_id == org.categories.get(slug="administration").pk
    assert start.ledger.run_id == run.pk
    # The request as the database says it, planned once, as a worker rebuilds it with the same function.
    assert start.request.messages == history_of(Run.objects.get(pk=run.pk))
    assert start.plan == plan_request(start.request, snapshot.catalogue(), start.policy)
    rebuilt = read_start(run.pk)
    assert rebuilt is not None
    assert (rebuilt.request, rebuilt.plan, rebuilt.policy, rebuilt.language) == (
        start.request,
        start.plan,
        start.policy,
        start.language,
    )
    # A Stop sent before the run starts is read as it is claimed.
    Run.objects.filter(pk=run.pk).update(stop_requested=True)
    with CaptureQueriesContext(connection) as sent:
        assert execution.claim(start) is not None
    assert start.run.stop_requested
    # The claim (which reads the Stop flag) and the tables: nothing intake read is read again, nor the history.
    assert len(_work(sent)) == 2, _work(sent)
    # Its first call takes intake's hold over without reading the category or its month again.
    with CaptureQueriesContext(connection) as sent:
        start.ledger._reserve(2_000, timezone.now())
    read_again = [q for q in _work(sent) if q.startswith("SELECT") and '"budgets_category' in q.split(" WHERE ")[0]]
    assert not read_again, read_again


def _reads(sent: CaptureQueriesContext, *tables: str) -> dict[str, int]:
    """How many times each of ``tables`` was read."""
    selects = [q for q in _work(sent) if q.startswith("SELECT")]
    return {t: sum(1 for q in selects if f'FROM "{t}"' in q.split(" WHERE ")[0]) for t in tables}


# What the organisation's policy reads (its levels, its agents' profiles) and what the check of a chosen base reads.
POLICY = (ReasoningLevel._meta.db_table, AgentProfile._meta.db_table)
POLICY_AND_CHECK = (*POLICY, KnowledgeBase._meta.db_table)


def test_a_page_s_message_is_checked_once_with_the_policy_read_once(org: Organisation) -> None:
    """``intake.submit``, a run or a queued message: one read of the policy, one check of the chosen base (counted
    at the database)."""
    user = get_user_model().objects.get(username="demo")
    ask = replace(ASK, resources=("kb:factures",))
    with CaptureQueriesContext(connection) as sent:
        start = intake.submit(user, org, None, ask)
    assert isinstance(start, RunStart)
    assert _reads(sent, *POLICY_AND_CHECK) == dict.fromkeys(POLICY_AND_CHECK, 1)
    run = start.run
    with CaptureQueriesContext(connection) as sent:
        queued = intake.submit(user, org, run.conversation, ask)  # the run still running
    assert isinstance(queued, Message) and queued.queued
    assert _reads(sent, *POLICY_AND_CHECK) == dict.fromkeys(POLICY_AND_CHECK, 1)
    empty = intake.Ask(text=" ", model="demo-small", level="rapide", resources=("kb:factures",))
    with CaptureQueriesContext(connection) as sent, pytest.raises(RequestRefused):
        intake.submit(user, org, run.conversation, empty)
    # Refused by the check before it reads the base: the policy read once, nothing else of the check.
    assert _reads(sent, *POLICY_AND_CHECK) == {**dict.fromkeys(POLICY, 1), KnowledgeBase._meta.db_table: 0}


def test_a_worker_reads_a_run_s_start_from_the_database(org: Organisation) -> None:
    run = _create(org)
    start = read_start(run.pk)
    assert start is not None and start.policy == policy_for(org)
    assert isinstance(start.ledger, CategoryLedger) and start.ledger.run_id == run.pk
    assert [m.content for m in start.request.messages] == ["Bimbamjob?"]
    Run.objects.filter(pk=run.pk).update(status="ok")
    assert read_start(run.pk) is None  # ended: nothing to start


def test_a_worker_rebuilds_an_api_run_s_tool_calls_and_the_client_s_tools(org: Organisation) -> None:
    remind = ToolCall("call_1", "send_reminder", '{"invoice": "F-1"}')
    prompt = (
        EngineMessage.user("Instructions for this conversation:\nBe brief."),
        EngineMessage.user("Bimbamjob?"),
        EngineMessage.assistant("", (remind,)),
        EngineMessage.tool(remind, "sent"),
    )
    spec = ToolSpec(name="send_reminder", description="Remind.", parameters={"type": "object", "properties": {}})
    tools = ClientTools(specs=(spec,), choice=NamedTool("send_reminder"), parallel=False)
    start = _start(org, replace(ASK, client_tools=tools), prompt=prompt)
    rebuilt = read_start(start.run.pk)
    assert rebuilt is not None and rebuilt.request == start.request
    assert rebuilt.request.messages == prompt and rebuilt.request.client_tools == tools
    # The conversation keeps the question as its text, as for any run.
    assert list(Message.objects.filter(run=start.run).values_list("role", "content")) == [("user", "Bimbamjob?")]


def test_earlier_messages_are_saved_with_the_run_in_a_new_conversation(org: Organisation) -> None:
    run = _create(org, earlier=[("user", "Hello"), ("assistant", "Hi! How can I help?")])
    saved = list(Message.objects.filter(conversation=run.conversation).values_list("role", "content", "run_id"))
    assert saved == [
        ("user", "Hello", None),
        ("assistant", "Hi! How can I help?", None),
        ("user", "Bimbamjob?", run.pk),
    ]
    before = Conversation.objects.count(), Message.objects.count(), Run.objects.count()
    with pytest.raises(RequestRefused):
        _create(org, intake.Ask(text="Hi", model="no-such-model", level=None, resources=()), earlier=[("user", "x")])
    assert (Conversation.objects.count(), Message.objects.count(), Run.objects.count()) == before  # nothing kept
    with pytest.raises(ValueError):
        intake.create_run(run.user, org, run.conversation, ASK, earlier=[("user", "x")])


def test_a_run_ends_with_one_query_for_a_queue_that_is_empty(org: Organisation) -> None:
    run = _create(org)
    Run.objects.filter(pk=run.pk).update(status="ok")
    with CaptureQueriesContext(connection) as sent:
        assert queue.next_queued(run.conversation_id) is None
    assert len(_work(sent)) == 1


def test_an_api_client_s_earlier_messages_reach_the_main_model_first_and_are_reserved(org: Organisation) -> None:
    """The messages saved with no run (an API client's conversation so far and system prompt) come first in what
    the main model reads, in order, before the question; and the first call's reservation counts them."""
    earlier = [
        ("user", "Instructions for this conversation:\nAnswer briefly."),
        ("user", "Hello"),
        ("assistant", "Hi!"),
    ]
    start = _start(org, earlier=earlier)
    history = history_of(start.run)
    assert [(m.role, m.content) for m in history] == [*earlier, ("user", ASK.text)]
    assert start.request.messages == history
    bare = intake.first_call_tokens(org, start.request, start.plan, start.policy)
    long = dataclasses.replace(
        start.request, messages=(*intake.history_before(None, ASK, [("user", "word " * 2_000)]),)
    )
    assert intake.first_call_tokens(org, long, start.plan, start.policy) >= bare + 2_000


def test_the_claim_reads_the_stop_flag_as_it_claims(org: Organisation) -> None:
    run = _create(org)
    stopped = _create(org, intake.Ask(text="Encore ?", model="demo-small", level="rapide", resources=()))
    Run.objects.filter(pk=stopped.pk).update(stop_requested=True)
    assert leases.claim_read(run.pk) is False
    assert leases.claim_read(stopped.pk) is True
    assert leases.claim_read(run.pk) is None  # held: not claimed twice
    Lease.objects.all().delete()
    Run.objects.filter(pk=run.pk).update(status="ok")
    assert leases.claim_read(run.pk) is None  # ended: not claimed


def test_intake_s_request_is_the_history_the_run_would_read(org: Organisation) -> None:
    earlier = [("user", "Instructions for this conversation:\nAnswer briefly."), ("assistant", "  "), ("user", "Hi")]
    start = _start(org, earlier=earlier)
    assert start.request.messages == history_of(Run.objects.get(pk=start.run.pk))
    # In a conversation that has turns already too.
    Run.objects.filter(pk=start.run.pk).update(status="ok")
    Message.objects.create(conversation=start.run.conversation, role="assistant", content="Hello.", run=start.run)
    later = intake.create_run(start.run.user, org, start.run.conversation, ASK)
    assert later.request.messages == history_of(Run.objects.get(pk=later.run.pk))
    assert [m.content for m in later.request.messages][1:] == ["Hi", "Bimbamjob?", "Hello.", "Bimbamjob?"]


def _ending(status: RunStatus, answer: str) -> execution.Ending:
    """A run's end with nothing read and nothing spent."""
    return execution.Ending(status, "", 1, answer, {}, RunUsage())


def test_a_run_s_end_is_one_transaction_with_its_last_settlements_and_its_release(org: Organisation) -> None:
    run = _create(org)
    assert leases.claim_read(run.pk) is not None
    month = CategoryMonth.objects.get(category__organisation=org, category__slug="administration")
    held, hold = month.reserved, Reservation.objects.get(run=run).tokens  # intake's: the run made no call
    settled: list[bool] = []

    def unsettled() -> None:
        settled.append(connection.in_atomic_block)

    with CaptureQueriesContext(connection) as sent:
        assert execution.end_run(run, _ending("ok", "The answer."), unsettled)
    assert settled == [True]  # written in the end's transaction
    began = [q["sql"] for q in sent if q["sql"].upper().startswith("BEGIN")]  # SQLite's (PostgreSQL's are not sent)
    assert len(began) <= 1, began
    month.refresh_from_db()
    assert month.reserved == held - hold and not Reservation.objects.filter(run=run).exists()  # given back
    saved = Run.objects.get(pk=run.pk)
    assert (saved.status, saved.rounds, saved.answer) == ("ok", 1, "The answer.") and saved.finished is not None
    assert Message.objects.filter(run=run, role="assistant").values_list("content", flat=True).get() == "The answer."


def test_a_run_failed_meanwhile_by_a_reaper_keeps_its_failure_and_still_settles(org: Organisation) -> None:
    run = _create(org)
    Run.objects.filter(pk=run.pk).update(status="error", error="died")
    settled: list[bool] = []
    assert execution.end_run(run, _ending("ok", "Late."), lambda: settled.append(True)) is None
    saved = Run.objects.get(pk=run.pk)
    assert (saved.status, saved.error, saved.answer) == ("error", "died", "")
    assert settled == [True] and not Reservation.objects.filter(run=run).exists()
    assert not Message.objects.filter(run=run, role="assistant").exists()


def test_a_run_ending_after_its_conversation_was_deleted_is_erased_reading_the_deletion_once(
    org: Organisation,
) -> None:
    from assistant.chat import deletion

    run = _create(org)
    deletion.erase(run.conversation_id)
    with CaptureQueriesContext(connection) as sent:
        assert execution.end_run(run, _ending("stopped", "A late answer"))
    saved = Run.objects.get(pk=run.pk)
    assert saved.status == "stopped" and saved.answer == ""  # erased as it was saved
    assert not Message.objects.filter(conversation_id=run.conversation_id).exists()
    # Read with the run's end (its UPDATE), not again by the receivers of the run's and its message's saves.
    asked = [q["sql"] for q in sent if q["sql"].startswith("SELECT") and '"deleted" IS NOT NULL' in q["sql"]]
    assert asked == [], asked
    # A run that ends in a conversation not deleted keeps its answer, and the deletion is not read either.
    other = _create(org, intake.Ask(text="Encore ?", model="demo-small", level="rapide", resources=()))
    with CaptureQueriesContext(connection) as sent:
        assert execution.end_run(other, _ending("ok", "Kept."))
    assert Run.objects.get(pk=other.pk).answer == "Kept."
    assert Message.objects.filter(run=other, role="assistant").exists()
    assert not [q for q in sent if q["sql"].startswith("SELECT") and '"deleted" IS NOT NULL' in q["sql"]]


def test_intake_reserves_on_the_month_row_its_admission_read(org: Organisation) -> None:
    _create(org)  # the category's month has its row now
    with CaptureQueriesContext(connection) as sent:
        run = _create(
            org,
            intake.Ask(text="Encore ?", model="demo-small", level="rapide", resources=(), category="administration"),
        )
    month = CategoryMonth.objects.get(category__organisation=org, category__slug="administration")
    assert Reservation.objects.get(run=run).month_id == month.pk
    # Read by the admission's check, with what the month has left: not read again for the reservation.
    read_again = [q["sql"] for q in sent if q["sql"].startswith('SELECT "budgets_categorymonth"')]
    assert read_again == [], read_again
