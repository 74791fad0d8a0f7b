"""The OpenAI API, or any server speaking its chat completions protocol (vLLM, Ollama, llama.cpp)."""

from __future__ import annotations

from urllib.parse import urlsplit

from openai import AsyncOpenAI

from ..errors import AuthenticationFailed

OPENAI_BASE_URL = "https://api.openai.com/v1"


class OpenAIProvider:
    """A client for ``base_url`` (the OpenAI API by default) with ``api_key``.

    ``official`` forces whether OpenAI-only parameters are sent (by default: when the host is
    api.openai.com).

    The SDK's own retries are off: the model adapter retries, the same way for every provider.
    """

    name = "openai"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 120.0,
        client: AsyncOpenAI | None = None,
        official: bool | None = None,
    ) -> None:
        if not api_key and client is None:
            raise AuthenticationFailed("No OpenAI API key is configured (set OPENAI_API_KEY).")
        self.base_url = (base_url or OPENAI_BASE_URL).rstrip("/")
        self.client = client or AsyncOpenAI(api_key=api_key, base_url=self.base_url, timeout=timeout, max_retries=0)
        self.is_openai = urlsplit(self.base_url).hostname == "api.openai.com" if official is None else official
        """Whether this is OpenAI itself, which takes parameters (``max_completion_tokens``,
        ``prompt_cache_key``) that some compatible servers refuse."""

    async def aclose(self) -> None:
        """Close the connections."""
        await self.client.close()
