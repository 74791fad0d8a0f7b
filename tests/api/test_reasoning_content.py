"""The main model's reasoning summary through the API, as OpenAI-compatible clients read it: streamed as
``delta.reasoning_content`` before each round's ``delta.content``, and as ``message.reasoning_content`` when not
streamed (the offline demo-large reasons, and says why it searches, then why it answers)."""

from __future__ import annotations

import pytest

from assistant.demo.model import say
from tests.api.api_support import Live

pytestmark = pytest.mark.slow

QUESTION = "Bimbamjob: invoices 2024?"
SEARCHING = {"tools_enabled": ["kb:factures"], "reasoning_level": "standard"}  # a level: the model reasons


def test_the_reasoning_summary_streams_before_each_rounds_text_and_is_in_the_message(live: Live) -> None:
    client = live.client()
    stream = client.chat.completions.create(
        model="demo-large", messages=[{"role": "user", "content": QUESTION}], extra_body=SEARCHING, stream=True
    )
    order: list[tuple[str, str]] = []
    for chunk in stream:
        for choice in chunk.choices:
            reasoning = (choice.delta.model_extra or {}).get("reasoning_content")
            if reasoning:
                order.append(("reasoning", reasoning))
            if choice.delta.content:
                order.append(("text", choice.delta.content))
    reasoning = "".join(piece for kind, piece in order if kind == "reasoning")
    answer = "".join(piece for kind, piece in order if kind == "text")
    # It searched, then answered: each round's summary came before what that round wrote.
    assert order[0] == ("reasoning", say("thinking_tools", "en")), order[:3]
    assert reasoning.endswith("\n\n" + say("thinking_answer", "en"))
    last = max(i for i, (kind, _) in enumerate(order) if kind == "reasoning")
    assert "Bimbamjob" in "".join(piece for kind, piece in order[last:] if kind == "text")  # the answer, after it

    completion = client.chat.completions.create(
        model="demo-large", messages=[{"role": "user", "content": QUESTION}], extra_body=SEARCHING
    )
    message = completion.choices[0].message
    assert (message.model_extra or {})["reasoning_content"] == reasoning
    assert message.content == answer
    # A model that does not reason has none.
    plain = client.chat.completions.create(
        model="demo-small", messages=[{"role": "user", "content": QUESTION}], extra_body=SEARCHING
    )
    assert (plain.choices[0].message.model_extra or {}).get("reasoning_content") is None
