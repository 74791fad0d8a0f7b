"""A request's estimated size counts each tool spec's schema and description, the same whether cached or not."""

from __future__ import annotations

import json

from assistant.engine.tokens import estimate_tokens, prompt_tokens, spec_tokens
from assistant.engine.types import Message, ModelRequest, ToolSpec


def _spec(name: str, size: int) -> ToolSpec:
    return ToolSpec(name=name, description=f"Finds {name}.", parameters={"type": "object", "x": "y" * size})


def test_a_spec_counts_its_schema_and_description_each_time() -> None:
    spec = _spec("kb_search", 400)
    expected = estimate_tokens(json.dumps(spec.parameters)) + estimate_tokens(spec.description)
    assert spec_tokens(spec) == expected
    assert spec_tokens(spec) == expected  # cached
    other = _spec("kb_search", 4000)  # another spec, another size
    assert spec_tokens(other) > expected


def test_a_request_counts_its_messages_and_its_specs() -> None:
    specs = (_spec("a", 100), _spec("b", 1000))
    request = ModelRequest(messages=(Message.user("hello " * 50),), tools=specs)
    assert prompt_tokens(request) == prompt_tokens(ModelRequest(messages=request.messages)) + sum(
        spec_tokens(s) for s in specs
    )
    assert prompt_tokens(request) > prompt_tokens(ModelRequest(messages=request.messages)) + 250


def test_many_specs_do_not_grow_the_cache_without_end() -> None:
    from assistant.engine import tokens

    for i in range(tokens._SPEC_CACHE_SIZE + 10):
        spec_tokens(_spec(f"t{i}", i % 50))
    assert len(tokens._SPEC_TOKENS) <= tokens._SPEC_CACHE_SIZE
