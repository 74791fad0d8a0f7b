"""Counting tokens: tiktoken's ``o200k_base`` when it can be loaded offline, else the engine's estimate.

tiktoken downloads its encodings on first use, which cannot work on a machine without network
access. The counter never downloads: it takes the ``o200k_base`` ranks file from tiktoken's own
cache when it is there, else from the copy bundled in the ``bpe-openai`` wheel when that package is
installed (tiktoken itself checks the file against the sha256 it expects, so a wrong file is refused).
Failing both, it falls back to ``estimate_tokens`` (about four characters a token) and says so.
"""

from __future__ import annotations

import gzip
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from assistant.engine.tokens import estimate_tokens

ENCODING = "o200k_base"


@dataclass(frozen=True, slots=True)
class TokenCounter:
    """Counts the tokens of a text; ``method`` says how, in words for the report."""

    count: Callable[[str], int]
    method: str
    exact: bool


def _bundled_ranks() -> bytes | None:
    """The ``o200k_base`` ranks file shipped inside the bpe-openai wheel, if that package is installed."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"{ENCODING}.tiktoken.gz"
    return gzip.decompress(path.read_bytes()) if path.is_file() else None


def token_counter() -> TokenCounter:
    estimate = TokenCounter(
        estimate_tokens,
        "the engine's `estimate_tokens` (characters ÷ 4, plus 1 per text), because tiktoken's "
        f"`{ENCODING}` could not be loaded offline on this machine: an estimate, not a tokenizer's count",
        exact=False,
    )
    try:
        import tiktoken
        import tiktoken.load
    except ImportError:
        return estimate
    bundled: list[bytes | None] = []
    original_read = tiktoken.load.read_file

    def read_offline(blobpath: str) -> bytes:
        # Only reached on a cache miss: serve the bundled copy of the file, never the network.
        if "://" not in blobpath:
            return original_read(blobpath)
        if blobpath.endswith(f"/{ENCODING}.tiktoken"):
            data = _bundled_ranks()
            if data is not None:
                bundled.append(data)
                return data
        raise OSError(f"offline: not downloading {blobpath}")

    try:
        with mock.patch.object(tiktoken.load, "read_file", read_offline):
            encoding = tiktoken.get_encoding(ENCODING)
    except (OSError, ValueError):
        return estimate
    source = (
        "ranks file taken from the `bpe-openai` wheel" if bundled else "ranks file from tiktoken's cache"
    ) + ", checked by tiktoken against the sha256 it expects"
    return TokenCounter(
        lambda text: len(encoding.encode(text, disallowed_special=())),
        f"tiktoken {tiktoken.__version__} `{ENCODING}` ({source})",
        exact=True,
    )
