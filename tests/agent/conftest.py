"""Fixtures shared by the agent tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="module")
def _fresh_openai_http_clients() -> None:
    """langchain-openai caches one async HTTP client per base URL and timeout, bound to the event loop of
    its first use; a module that plays its rounds in a new loop would reuse a client of a closed one
    ("Event loop is closed"). The agent process runs one loop, so only the tests need this."""
    from langchain_openai.chat_models import _client_utils

    _client_utils._cached_async_httpx_client.cache_clear()
    _client_utils._cached_sync_httpx_client.cache_clear()
