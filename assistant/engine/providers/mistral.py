"""The Mistral API (La Plateforme), or a server speaking its protocol at another address."""

from __future__ import annotations

from mistralai.client import Mistral

from ..errors import AuthenticationFailed

MISTRAL_BASE_URL = "https://api.mistral.ai"


class MistralProvider:
    """A client for ``base_url`` (La Plateforme by default) with ``api_key``.

    ``base_url`` is the server's root: the SDK adds ``/v1/...`` itself, so a trailing ``/v1`` is
    dropped. The SDK retries nothing unless told to: the model adapter retries.
    """

    name = "mistral"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 120.0,
        client: Mistral | None = None,
    ) -> None:
        if not api_key and client is None:
            raise AuthenticationFailed("No Mistral API key is configured (set MISTRAL_API_KEY).")
        self.base_url = (base_url or MISTRAL_BASE_URL).rstrip("/").removesuffix("/v1")
        self.client = client or Mistral(api_key=api_key, server_url=self.base_url, timeout_ms=int(timeout * 1000))

    async def aclose(self) -> None:
        """Close the connections (the sync client the SDK also opens included)."""
        config = self.client.sdk_configuration
        if config.async_client is not None:
            await config.async_client.aclose()
        if config.client is not None:
            config.client.close()
