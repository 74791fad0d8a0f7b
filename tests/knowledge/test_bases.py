"""Organisation admins manage knowledge bases in the app: create, edit, delete; members may not; other organisations 404."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models.signals import pre_save
from django.test import Client
from django.urls import reverse

from assistant.engine.errors import RequestRefused
from assistant.knowledge.fulltext import search
from assistant.knowledge.models import Document, KnowledgeBase
from assistant.orgs import keys
from assistant.orgs.models import Organisation
from assistant.runs import intake
from assistant.runs.models import Conversation, Run
from assistant.schedules import services
from assistant.schedules.models import Execution, ScheduledTask
from tests.chat.chat_support import ComposerPost
from tests.knowledge.knowledge_support import (
    CORPUS,
    RANKING_QUERY,
    check_base_deletion,
    extract_pending,
    files_under,
    fts_rowids,
    two_orgs,
    wait_processed,
)

pytestmark = pytest.mark.django_db

NEW = {"name": "Rapports d'activité 2024", "slug": "", "description": "Les rapports annuels."}


def _upload(client: Client, slug: str, *files: tuple[str, bytes]) -> Any:
    return client.post(
        reverse("kb_base", args=[slug]), {"files": [SimpleUploadedFile(name, data) for name, data in files]}
    )


def test_an_admin_creates_a_base_its_slug_made_from_its_name(media: Path) -> None:
    a, _ = two_orgs()
    client = a.admin_client()
    assert reverse("kb_new") in client.get(reverse("kb_bases")).content.decode()
    page = client.get(reverse("kb_new"))
    assert page.status_code == 200 and 'name="slug"' in page.content.decode()
    response = client.post(reverse("kb_new"), NEW)
    assert response.status_code == 302 and response["Location"] == reverse("kb_base", args=["rapports-dactivite-2024"])
    kb = KnowledgeBase.objects.get(organisation=a.org, slug="rapports-dactivite-2024")
    assert (kb.name, kb.description) == ("Rapports d'activité 2024", "Les rapports annuels.")
    listing = client.get(reverse("kb_bases")).content.decode()
    assert "Rapports d&#x27;activité 2024" in listing and "Les rapports annuels." in listing
    assert "kb:" not in listing  # the identifier only on the base's own page, for admins
    base = client.get(reverse("kb_base", args=["rapports-dactivite-2024"])).content.decode()
    assert "<code>kb:rapports-dactivite-2024</code>" in base
    # A slug given is kept; the new base takes documents and is searched like any other.
    response = client.post(reverse("kb_new"), {"name": "Contrats", "slug": "contrats-2025", "description": ""})
    assert response.status_code == 302
    assert _upload(client, "contrats-2025", ("bail.txt", b"Le bail du hangar court jusqu'en 2030.")).status_code == 302
    extract_pending()
    hits, total = search(a.org.pk, "contrats-2025", "hangar", 8)
    assert total == 1 and hits[0].kb == "contrats-2025"


def test_an_admin_edits_the_name_and_description_but_never_the_slug() -> None:
    a, _ = two_orgs()
    client = a.admin_client()
    url = reverse("kb_edit", args=["factures"])
    page = client.get(url).content.decode()
    assert 'value="Factures"' in page and 'name="slug"' not in page
    response = client.post(url, {"name": "Factures clients", "slug": "hijacked", "description": "Depuis 2019."})
    assert response.status_code == 302 and response["Location"] == reverse("kb_base", args=["factures"])
    a.kb.refresh_from_db()
    assert (a.kb.name, a.kb.slug, a.kb.description) == ("Factures clients", "factures", "Depuis 2019.")
    assert KnowledgeBase.objects.filter(organisation=a.org).count() == 1
    assert "Factures clients" in client.get(reverse("kb_base", args=["factures"])).content.decode()


def test_an_admin_deletes_a_base_with_its_documents_files_and_index_entries(
    media: Path, django_capture_on_commit_callbacks: Any
) -> None:
    a, b = two_orgs()
    client = a.admin_client()
    kept = KnowledgeBase.objects.create(organisation=a.org, slug="contrats", name="Contrats")
    _upload(client, "contrats", ("bail.txt", b"the wallaby lease"))
    _upload(client, "factures", ("one.txt", b"the wallaby invoice"), ("two.md", b"# Wallaby\n\nturbine invoice"))
    extract_pending()
    doomed = list(Document.objects.filter(knowledge_base=a.kb).values_list("pk", flat=True))
    assert len(doomed) == len(CORPUS) + 2 and len(files_under(media)) == 3
    assert set(doomed) & fts_rowids("turbine") and set(doomed) & fts_rowids("wallaby")

    page = client.get(reverse("kb_base", args=["factures"])).content.decode()
    assert reverse("kb_base_delete", args=["factures"]) in page
    confirm = client.get(reverse("kb_base_delete", args=["factures"]))
    assert confirm.status_code == 200 and "6 documents" in confirm.content.decode()
    assert KnowledgeBase.objects.filter(pk=a.kb.pk).exists()  # asking is not deleting

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("kb_base_delete", args=["factures"]))
    assert response.status_code == 302 and response["Location"] == reverse("kb_bases")
    assert not KnowledgeBase.objects.filter(pk=a.kb.pk).exists()
    assert not Document.objects.filter(pk__in=doomed).exists()
    assert [p.name for p in files_under(media)] == [Path(Document.objects.get(knowledge_base=kept).file.name).name]
    assert not set(doomed) & (fts_rowids("turbine") | fts_rowids("wallaby"))  # the FTS5 entries went with the rows
    assert search(a.org.pk, "factures", "wallaby", 8) == ([], 0)
    assert search(a.org.pk, "factures", RANKING_QUERY, 8) == ([], 0)
    # The organisation's other base and another organisation's base of the same slug are untouched.
    assert search(a.org.pk, "contrats", "wallaby", 8)[1] == 1
    assert search(b.org.pk, "factures", RANKING_QUERY, 8)[1] == 1
    listing = client.get(reverse("kb_bases")).content.decode()
    assert "and its 6 documents were deleted" in listing and "kb:factures" not in listing
    assert client.get(reverse("kb_base", args=["factures"])).status_code == 404


def test_deleting_a_base_through_the_service_empties_the_search() -> None:
    check_base_deletion(*two_orgs())


def test_deletion_is_post_only_and_needs_the_csrf_token() -> None:
    a, _ = two_orgs()
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(a.admin)
    assert strict.post(reverse("kb_base_delete", args=["factures"])).status_code == 403
    assert strict.post(reverse("kb_new"), NEW).status_code == 403
    assert a.admin_client().put(reverse("kb_base_delete", args=["factures"])).status_code == 405
    assert KnowledgeBase.objects.filter(pk=a.kb.pk).exists() and not KnowledgeBase.objects.filter(name=NEW["name"])


def test_a_member_gets_403_on_every_admin_action_and_sees_no_button(media: Path) -> None:
    a, _ = two_orgs()
    client = a.client()
    listing = client.get(reverse("kb_bases")).content.decode()
    assert "Factures" in listing and reverse("kb_new") not in listing
    page = client.get(reverse("kb_base", args=["factures"])).content.decode()
    assert all(d.title in page for d in a.docs)
    for url in (reverse("kb_edit", args=["factures"]), reverse("kb_base_delete", args=["factures"])):
        assert url not in page
    assert "/documents/" not in page  # no document delete form
    doc = a.docs[0]
    assert client.get(reverse("kb_new")).status_code == 403
    assert client.post(reverse("kb_new"), NEW).status_code == 403
    assert client.get(reverse("kb_edit", args=["factures"])).status_code == 403
    assert client.post(reverse("kb_edit", args=["factures"]), {"name": "Mine", "description": ""}).status_code == 403
    assert client.get(reverse("kb_base_delete", args=["factures"])).status_code == 403
    assert client.post(reverse("kb_base_delete", args=["factures"])).status_code == 403
    assert client.post(reverse("kb_delete", args=["factures", doc.pk])).status_code == 403
    response = client.post(reverse("kb_delete", args=["factures", doc.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 403
    a.kb.refresh_from_db()
    assert a.kb.name == "Factures" and Document.objects.filter(pk=doc.pk).exists()
    assert KnowledgeBase.objects.filter(organisation=a.org).count() == 1
    # Uploading stays open to members.
    assert _upload(client, "factures", ("notes.txt", b"member notes")).status_code == 302
    assert Document.objects.filter(knowledge_base=a.kb, filename="notes.txt").exists()


def test_another_organisations_base_is_404_for_admins_and_members() -> None:
    a, b = two_orgs()
    b.kb.slug = "secrets"
    b.kb.save()
    for client in (a.admin_client(), a.client()):
        assert client.get(reverse("kb_edit", args=["secrets"])).status_code == 404
        assert (
            client.post(reverse("kb_edit", args=["secrets"]), {"name": "Taken", "description": ""}).status_code == 404
        )
        assert client.get(reverse("kb_base_delete", args=["secrets"])).status_code == 404
        assert client.post(reverse("kb_base_delete", args=["secrets"])).status_code == 404
    b.kb.refresh_from_db()
    assert b.kb.name == "Factures" and Document.objects.filter(knowledge_base=b.kb).count() == 2
    # The same slug in another organisation is no conflict.
    assert a.admin_client().post(reverse("kb_new"), {**NEW, "slug": "secrets"}).status_code == 302
    assert KnowledgeBase.objects.filter(slug="secrets").count() == 2


@pytest.mark.parametrize(
    ("post", "message"),
    [
        ({"name": "Invoices", "slug": "factures"}, "already has a knowledge base with the slug “factures”"),
        ({"name": "Factures"}, "already has a knowledge base with the slug “factures”"),  # the suggested slug
        ({"name": ""}, "Give the base a name."),
        ({"name": "   "}, "Give the base a name."),
        ({"name": "???"}, "No slug can be made from this name"),
        ({"name": "Bad", "slug": "not a slug!"}, "Enter a valid “slug”"),
        ({"name": "x" * 201}, "at most 200 characters"),
        ({"name": "Long", "slug": "s" * 51}, "at most 50 characters"),
    ],
)
def test_bad_input_is_a_422_with_the_forms_message(post: dict[str, str], message: str) -> None:
    a, _ = two_orgs()
    response = a.admin_client().post(reverse("kb_new"), {"slug": "", "description": "", **post})
    assert response.status_code == 422
    assert message in response.content.decode()
    assert list(KnowledgeBase.objects.filter(organisation=a.org).values_list("slug", flat=True)) == ["factures"]


def test_a_long_name_gets_a_slug_that_fits() -> None:
    a, _ = two_orgs()
    response = a.admin_client().post(reverse("kb_new"), {**NEW, "name": "Procès-verbaux " * 10})
    assert response.status_code == 302
    slug = KnowledgeBase.objects.exclude(pk=a.kb.pk).get(organisation=a.org).slug
    assert len(slug) <= 50 and slug.startswith("proces-verbaux-proces-verbaux") and not slug.endswith("-")


def test_an_emptied_name_on_edit_is_a_422_and_changes_nothing() -> None:
    a, _ = two_orgs()
    response = a.admin_client().post(reverse("kb_edit", args=["factures"]), {"name": " ", "description": "x"})
    assert response.status_code == 422 and "Give the base a name." in response.content.decode()
    a.kb.refresh_from_db()
    assert (a.kb.name, a.kb.description) == ("Factures", "")


def test_a_slug_taken_after_the_form_was_checked_is_a_422_not_a_500() -> None:
    a, _ = two_orgs()
    raced: list[int] = []

    def someone_else_first(sender: type[KnowledgeBase], instance: KnowledgeBase, **kwargs: Any) -> None:
        if instance.pk is None and not raced:
            raced.append(1)
            KnowledgeBase.objects.create(organisation=instance.organisation, slug=instance.slug, name="Theirs")

    pre_save.connect(someone_else_first, sender=KnowledgeBase)
    try:
        response = a.admin_client().post(reverse("kb_new"), {**NEW, "slug": "rapports"})
    finally:
        pre_save.disconnect(someone_else_first, sender=KnowledgeBase)
    assert raced and response.status_code == 422
    assert "already has a knowledge base with the slug “rapports”" in response.content.decode()
    assert not KnowledgeBase.objects.filter(name=NEW["name"]).exists()  # (here "theirs" rolled back with it)


def test_the_pages_speak_french() -> None:
    a, _ = two_orgs()
    client = a.admin_client()
    client.cookies["django_language"] = "fr"
    assert "Nouvelle base de connaissances" in client.get(reverse("kb_bases")).content.decode()
    response = client.post(reverse("kb_new"), {"name": "Factures", "slug": "", "description": ""})
    assert "Votre organisation a déjà une base de connaissances de slug « factures »" in response.content.decode()
    page = client.get(reverse("kb_base_delete", args=["factures"])).content.decode()
    assert "Supprimer la base et ses documents" in page and "4 documents" in page


# A base named by a scheduled task, a conversation's saved resources or an API client, then deleted.


def test_requests_naming_a_deleted_base_are_refused_with_the_clear_message(demo_data: None) -> None:
    org = Organisation.objects.get(slug="demo")
    client = Client()
    assert client.login(username="demo", password="demo-password")  # an admin of the demo organisation
    ask: ComposerPost = {
        "text": "Bimbamjob: invoices 2024",
        "model": "demo-large",
        "level": "approfondi",
        "resources": ["kb:factures", "kb:comptes-rendus", "agents"],
    }
    task_form = {**ask, "name": "Watch", "prompt": ask["text"], "category": "", "cost_cap_eur": "0.5"}
    assert client.post("/tasks/new", {**task_form, "schedule": "0 7 * * 1-5", "enabled": "on"}).status_code == 302
    task = ScheduledTask.objects.get()
    user = org.memberships.get(user__username="demo").user
    earlier = intake.create_run(
        user, org, None, intake.Ask(ask["text"], "demo-large", "approfondi", ("kb:factures",))
    ).run
    Run.objects.filter(pk=earlier.pk).update(status="ok", answer="Done.")
    _key, secret = keys.create_key(org, "client")

    assert client.post(reverse("kb_base_delete", args=["factures"])).status_code == 302
    message = "The knowledge base &#x27;factures&#x27; does not exist or you may not read it."

    # The chat: a new conversation, and the conversation whose last run named the base.
    response = client.post("/c/new", ask)
    assert response.status_code == 422 and message in response.content.decode()
    conversation = Conversation.objects.get(pk=earlier.conversation_id)
    page = client.get(f"/c/{conversation.pk}/")
    assert page.status_code == 200 and 'value="kb:factures"' not in page.content.decode()
    response = client.post(f"/c/{conversation.pk}/send", ask)
    assert response.status_code == 422 and message in response.content.decode()
    assert Run.objects.count() == 1
    with pytest.raises(RequestRefused, match="The knowledge base 'factures' does not exist or you may not read it"):
        intake.create_run(user, org, None, intake.Ask(ask["text"], "demo-large", "approfondi", ("kb:factures",)))

    # The scheduled task: its page still opens, and an execution is refused and recorded, nothing runs.
    assert client.get(f"/tasks/{task.pk}/").status_code == 200
    assert services.start_execution(task.pk, now=True) is None
    execution = Execution.objects.get()
    assert execution.run is None
    assert "The knowledge base 'factures' does not exist or you may not read it." in execution.refused_text
    assert "did not start" in client.get("/tasks/").content.decode()
    assert Run.objects.count() == 1

    # The API: the knowledge base is unknown (404), as one that never existed.
    response = Client().post(
        "/v1/chat/completions",
        json.dumps(
            {"model": "demo-large", "messages": [{"role": "user", "content": "?"}], "tools_enabled": ["kb:factures"]}
        ),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "knowledge_base_not_found"
    assert Run.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_staff_deleting_in_the_django_admin_remove_the_stored_files_too(media: Path) -> None:
    a, _ = two_orgs()
    client = a.admin_client()
    assert _upload(client, a.kb.slug, ("one.txt", b"Turbine one."), ("two.txt", b"Turbine two.")).status_code == 302
    wait_processed(*Document.objects.filter(knowledge_base=a.kb).values_list("pk", flat=True))
    assert len(files_under(media)) == 2
    staff = Client()
    staff.force_login(type(a.admin).objects.create_superuser(username="staff", password=None))
    doc = Document.objects.filter(knowledge_base=a.kb).exclude(file="").first()
    assert doc is not None
    page = staff.post(reverse("admin:knowledge_document_delete", args=[doc.pk]), {"post": "yes"})
    assert page.status_code == 302 and not Document.objects.filter(pk=doc.pk).exists()
    assert len(files_under(media)) == 1
    page = staff.post(
        reverse("admin:knowledge_knowledgebase_changelist"),
        {"action": "delete_selected", "_selected_action": [a.kb.pk], "post": "yes"},
    )
    assert page.status_code == 302 and not KnowledgeBase.objects.filter(pk=a.kb.pk).exists()
    assert files_under(media) == []
