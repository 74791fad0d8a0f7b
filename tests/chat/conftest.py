"""Fixtures of the chat tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.contrib.auth import get_user_model
from django.core.management import call_command

from assistant.orgs.models import Organisation
from assistant.runs.models import Conversation
from tests.chat.chat_support import Page, open_socket, signed_in


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def fresh_channel_layer() -> Iterator[None]:
    # The in-memory layer's queues belong to the event loop that made them: one per test.
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


def _new_conversation() -> Conversation:
    call_command("load_demo", verbosity=0)
    user = get_user_model().objects.get(username="demo")
    org = Organisation.objects.get(memberships__user=user)
    return Conversation.objects.create(organisation=org, user=user, title="A conversation")


@pytest.fixture
async def demo_conversation() -> Conversation:
    """The demo loaded, and a new conversation of its user ``demo`` (a transactional test's: runs execute in it)."""
    return await sync_to_async(_new_conversation)()


@pytest.fixture
async def demo_page(demo_conversation: Conversation, fresh_channel_layer: None) -> AsyncIterator[Page]:
    """``demo`` signed in, with that conversation's page open (its websocket), closed after the test."""
    client, session = await signed_in()
    page = Page(client, demo_conversation, await open_socket(f"/ws/c/{demo_conversation.pk}/", session))
    try:
        yield page
    finally:
        await page.close()
