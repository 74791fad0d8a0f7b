"""The settings page: an admin changes each setting and the next run's Policy reflects it; members get 403."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import Client

from assistant.engine.policy import DEFAULT_LEVELS
from assistant.engine.policy import AgentProfile as EngineProfile
from assistant.orgs.models import AgentProfile, Organisation, ReasoningLevel
from assistant.orgs.services import policy_for
from tests.orgs.orgs_support import World, levels_post, signed_in

pytestmark = pytest.mark.django_db


def profile_post(**changes: Any) -> dict[str, Any]:
    return {
        "name": "verifier",
        "instructions": "Check every figure twice.",
        "default_model": "demo-small",
        "tools": ["kb"],
    } | changes


def demo_org() -> Organisation:
    return Organisation.objects.get(slug="demo")


# Reading the page ----------------------------------------------------------------------------


def test_the_admin_sees_the_page_and_the_header_links_to_it(world: World) -> None:
    client = signed_in("demo")
    page = client.get("/settings/")
    assert page.status_code == 200
    html = page.content.decode()
    for text in ("Models", "Reasoning levels", "Agent profiles", "Demo Large", "Demo Small", "Approfondi", "Maximal"):
        assert text in html
    assert 'href="/settings/"' in client.get("/").content.decode()


def test_a_fresh_organisation_has_the_engine_defaults() -> None:
    org = Organisation.objects.create(name="Fresh", slug="fresh")
    policy = policy_for(org)
    assert policy.allowed_models is None
    assert dict(policy.levels) == dict(DEFAULT_LEVELS)
    assert policy.max_parallel_agents == 4
    assert policy.default_agent_rounds == 5
    assert dict(policy.profiles) == {}


def test_the_page_speaks_french(world: World) -> None:
    client = signed_in("demo")
    client.cookies["django_language"] = "fr"
    html = client.get("/settings/").content.decode()
    assert "Niveaux de raisonnement" in html and "Profils d’agents" in html
    assert 'href="/settings/">Paramètres</a>' in client.get("/").content.decode()


def test_each_model_s_prices_say_when_the_catalogue_recorded_them(world: World) -> None:
    client = signed_in("demo")
    assert (
        "Demo Small (offline demo) — 0.2 / 0.6 EUR (prices of 1 December 2025)"
        in client.get("/settings/").content.decode()
    )
    client.cookies["django_language"] = "fr"
    assert "(prix du 1er décembre 2025)" in client.get("/settings/").content.decode()


# Each setting reaches the Policy ---------------------------------------------------------------


def test_restricting_models_reaches_the_policy_and_the_composer(world: World) -> None:
    client = signed_in("demo")
    response = client.post("/settings/models", {"restrict": "1", "models": ["demo-large"]})
    assert response.status_code == 302
    assert demo_org().allowed_models == ["demo-large"]
    assert policy_for(demo_org()).allowed_models == frozenset({"demo-large"})
    composer = client.get("/").content.decode()
    assert 'value="demo-large"' in composer and 'value="demo-small"' not in composer
    # And back to the whole catalogue, models added later included.
    client.post("/settings/models", {"restrict": "", "models": ["demo-large"]})
    assert demo_org().allowed_models is None
    assert 'value="demo-small"' in client.get("/").content.decode()


def test_restricting_to_no_model_is_refused(world: World) -> None:
    response = signed_in("demo").post("/settings/models", {"restrict": "1"})
    assert response.status_code == 422
    assert "Tick at least one model" in response.content.decode()
    assert demo_org().allowed_models is None


def test_a_model_outside_the_catalogue_cannot_be_allowed(world: World) -> None:
    response = signed_in("demo").post("/settings/models", {"restrict": "1", "models": ["gpt-unknown"]})
    assert response.status_code == 422
    assert demo_org().allowed_models is None


def test_levels_and_the_parallel_cap_reach_the_policy(world: World) -> None:
    client = signed_in("demo")
    data = levels_post(
        rapide__effort="", rapide__main_rounds=1,
        approfondi__effort="medium", approfondi__main_rounds=3, approfondi__agent_rounds=2,
        maximal__agent_rounds=20,
        parallel__max_parallel_agents=2,
    )  # fmt: skip
    assert client.post("/settings/levels", data).status_code == 302
    policy = policy_for(demo_org())
    assert policy.levels["rapide"].effort is None and policy.levels["rapide"].main_rounds == 1
    approfondi = policy.levels["approfondi"]
    assert (approfondi.effort, approfondi.main_rounds, approfondi.agent_rounds) == ("medium", 3, 2)
    assert policy.levels["maximal"].agent_rounds == 20
    assert policy.max_parallel_agents == 2
    # A request with no level (the API) gets Approfondi's budgets.
    assert (policy.default_main_rounds, policy.default_agent_rounds) == (3, 2)
    assert ReasoningLevel.objects.filter(organisation=demo_org()).count() == 4
    # The page shows what was saved.
    html = client.get("/settings/").content.decode()
    assert 'name="approfondi-agent_rounds" value="2"' in html


def test_the_cost_over_which_a_delegation_is_asked_reaches_the_policy(world: World) -> None:
    client = signed_in("demo")
    assert policy_for(demo_org()).delegation_cap_eur is None  # never asked, by default
    assert client.post("/settings/levels", levels_post(parallel__delegation_confirm_eur="0.25")).status_code == 302
    assert policy_for(demo_org()).delegation_cap_eur == 0.25
    page = client.get("/settings/").content.decode()
    assert "Ask before a delegation that can cost more than (EUR)" in page
    assert 'name="parallel-delegation_confirm_eur" value="0.25"' in page
    for refused in ("0", "-1", "lots"):
        assert client.post("/settings/levels", levels_post(parallel__delegation_confirm_eur=refused)).status_code == 422
    assert policy_for(demo_org()).delegation_cap_eur == 0.25
    assert client.post("/settings/levels", levels_post(parallel__delegation_confirm_eur="")).status_code == 302
    assert policy_for(demo_org()).delegation_cap_eur is None
    client.cookies["django_language"] = "fr"
    assert "Demander avant une délégation qui peut coûter plus de (EUR)" in client.get("/settings/").content.decode()


def test_below_approfondi_the_agent_budget_stays_zero(world: World) -> None:
    client = signed_in("demo")
    assert (
        client.post("/settings/levels", levels_post(rapide__agent_rounds=5, standard__agent_rounds=3)).status_code
        == 302
    )
    policy = policy_for(demo_org())
    assert policy.levels["rapide"].agent_rounds == 0 and policy.levels["standard"].agent_rounds == 0
    # Even a row written around the form (the Django admin validates it too) gives no agents.
    row = ReasoningLevel.objects.get(organisation=demo_org(), level="standard")
    row.agent_rounds = 4
    with pytest.raises(ValidationError):
        row.full_clean()
    row.save()
    assert policy_for(demo_org()).levels["standard"].agent_rounds == 0


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("parallel__max_parallel_agents", 5, "less than or equal to 4"),
        ("parallel__max_parallel_agents", 0, "greater than or equal to 1"),
        ("approfondi__main_rounds", 0, "greater than or equal to 1"),
        ("maximal__agent_rounds", 21, "less than or equal to 20"),
        ("maximal__agent_rounds", -1, "greater than or equal to 0"),
        ("standard__effort", "extreme", "Select a valid choice"),
    ],
)
def test_out_of_range_settings_are_refused_and_nothing_is_saved(
    world: World, field: str, value: Any, message: str
) -> None:
    client = signed_in("demo")
    response = client.post("/settings/levels", levels_post(approfondi__agent_rounds=3, **{field: value}))
    assert response.status_code == 422
    assert message in response.content.decode()
    assert not ReasoningLevel.objects.exists()
    assert demo_org().max_parallel_agents == 4


def test_the_database_refuses_a_parallel_cap_above_four(world: World) -> None:
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Organisation.objects.filter(pk=world.demo.pk).update(max_parallel_agents=5)


# Agent profiles ------------------------------------------------------------------------------


def test_profiles_are_created_edited_and_deleted(world: World) -> None:
    client = signed_in("demo")
    assert client.get("/settings/profiles/new").status_code == 200
    assert client.post("/settings/profiles/new", profile_post(tools=["web", "kb"])).status_code == 302
    profile = AgentProfile.objects.get(organisation=world.demo)
    assert profile.tools == ["kb", "web"]
    assert policy_for(world.demo).profiles == {
        "verifier": EngineProfile(
            name="verifier",
            instructions="Check every figure twice.",
            default_model="demo-small",
            tools=frozenset({"kb", "web"}),
        )
    }

    assert client.get(f"/settings/profiles/{profile.pk}/").status_code == 200
    edited = profile_post(name="auditor", default_model="", tools=["code"], instructions="Audit.")
    assert client.post(f"/settings/profiles/{profile.pk}/", edited).status_code == 302
    (engine_profile,) = policy_for(world.demo).profiles.values()
    assert (engine_profile.name, engine_profile.default_model, engine_profile.tools) == (
        "auditor",
        None,
        frozenset({"code"}),
    )
    assert "auditor" in client.get("/settings/").content.decode()

    assert client.post(f"/settings/profiles/{profile.pk}/delete").status_code == 302
    assert not AgentProfile.objects.filter(organisation=world.demo).exists()
    assert policy_for(world.demo).profiles == {}
    # The other organisation's profile is untouched.
    assert AgentProfile.objects.filter(pk=world.other_profile.pk).exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"default_model": "gpt-unknown"}, "Select a valid choice"),
        ({"tools": []}, "Tick at least one kind of resource"),
        ({"tools": ["agents"]}, "Select a valid choice"),
        ({"name": ""}, "This field is required"),
        ({"name": "<script>"}, "Letters, digits, spaces"),
        ({"instructions": ""}, "This field is required"),
    ],
)
def test_an_invalid_profile_is_refused(world: World, changes: dict[str, Any], message: str) -> None:
    response = signed_in("demo").post("/settings/profiles/new", profile_post(**changes))
    assert response.status_code == 422
    assert message in response.content.decode()
    assert not AgentProfile.objects.filter(organisation=world.demo).exists()


def test_profile_names_are_unique_within_an_organisation_only(world: World) -> None:
    client = signed_in("demo")
    assert client.post("/settings/profiles/new", profile_post()).status_code == 302
    response = client.post("/settings/profiles/new", profile_post(name="Verifier"))
    assert response.status_code == 422 and "already exists" in response.content.decode()
    # Another organisation's profile name is free here.
    assert client.post("/settings/profiles/new", profile_post(name="other-checker")).status_code == 302


def test_a_default_model_must_be_in_the_catalogue_wherever_it_is_saved(world: World) -> None:
    profile = AgentProfile(
        organisation=world.demo, name="x", instructions="y", default_model="gpt-unknown", tools=["kb"]
    )
    with pytest.raises(ValidationError) as refused:
        profile.full_clean()
    assert "not in the model catalogue" in str(refused.value)
    # A profile whose model left the catalogue (or the allowed list) is flagged on the page.
    AgentProfile.objects.create(
        organisation=world.demo, name="stale", instructions="y", default_model="gpt-gone", tools=["kb"]
    )
    html = signed_in("demo").get("/settings/").content.decode()
    assert "not allowed or not in the catalogue" in html
    response = signed_in("demo").post(
        f"/settings/profiles/{AgentProfile.objects.get(name='stale').pk}/",
        profile_post(name="stale", default_model="gpt-gone"),
    )
    assert response.status_code == 422 and "not in the model catalogue" in response.content.decode()


# Who may change them -------------------------------------------------------------------------


def _posts(profile_id: int) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("/settings/models", {"restrict": "1", "models": ["demo-large"]}),
        ("/settings/levels", levels_post(approfondi__agent_rounds=1)),
        ("/settings/profiles/new", profile_post()),
        (f"/settings/profiles/{profile_id}/", profile_post(name="renamed")),
        (f"/settings/profiles/{profile_id}/delete", {}),
    ]


def test_members_get_403_and_change_nothing(world: World) -> None:
    own = AgentProfile.objects.create(organisation=world.demo, name="own", instructions="x", tools=["kb"])
    client = signed_in("mia")
    for url in ("/settings/", "/settings/profiles/new", f"/settings/profiles/{own.pk}/"):
        assert client.get(url).status_code == 403, url
    for url, data in _posts(own.pk):
        assert client.post(url, data).status_code == 403, url
    assert demo_org().allowed_models is None
    assert not ReasoningLevel.objects.exists()
    assert list(AgentProfile.objects.filter(organisation=world.demo).values_list("name", flat=True)) == ["own"]
    assert 'href="/settings/"' not in client.get("/").content.decode()


def test_a_user_of_no_organisation_gets_404_and_anonymous_users_sign_in(world: World) -> None:
    get_user_model().objects.create_user("nobody", password="nobody-password")
    assert signed_in("nobody").get("/settings/").status_code == 404
    response = Client().get("/settings/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_every_form_needs_its_csrf_token(world: World) -> None:
    own = AgentProfile.objects.create(organisation=world.demo, name="own", instructions="x", tools=["kb"])
    client = signed_in("demo", enforce_csrf_checks=True)
    for url, data in _posts(own.pk):
        assert client.post(url, data).status_code == 403, url
    assert demo_org().allowed_models is None and AgentProfile.objects.filter(name="own").exists()
    page = client.get("/settings/")
    assert (
        page.content.decode().count('name="csrfmiddlewaretoken"') >= 4
    )  # models, levels, a delete, the language switch
    token = client.cookies["csrftoken"].value
    for url, data in _posts(own.pk):
        assert client.post(url, {**data, "csrfmiddlewaretoken": token}).status_code == 302, url
    assert demo_org().allowed_models == ["demo-large"]


def test_staff_edit_the_policy_in_the_django_admin(world: World) -> None:
    get_user_model().objects.create_superuser("staff", password="staff-password")
    client = signed_in("staff")
    profile = AgentProfile.objects.create(organisation=world.demo, name="own", instructions="x", tools=["kb"])
    for url in (
        f"/admin/orgs/organisation/{world.demo.pk}/change/",
        "/admin/orgs/reasoninglevel/add/",
        f"/admin/orgs/agentprofile/{profile.pk}/change/",
    ):
        assert client.get(url).status_code == 200, url
    response = client.post(
        f"/admin/orgs/agentprofile/{profile.pk}/change/",
        {
            "organisation": world.demo.pk,
            "name": "own",
            "instructions": "x",
            "default_model": "gpt-unknown",
            "tools": '["kb"]',
        },
    )
    assert response.status_code == 200 and "not in the model catalogue" in response.content.decode()
