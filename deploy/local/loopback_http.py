"""Plain-HTTP requests to the local services (readiness polls, /metrics, the tests' requests).

`httpx.get` and `httpx.post` build a new Client for every call, and every Client loads the CA bundle into
a fresh SSL context: CPU that a readiness poll ten times a second, or a fuzz test's hundreds of requests,
spent for nothing on plain HTTP. These share one Client per thread instead. Keep-alive is off, so each
request still opens and closes its own connection, as those calls did: what a server sees is unchanged.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx

_local = threading.local()


def client() -> httpx.Client:
    """This thread's client (httpx's defaults, a 5 s timeout, no connection kept between requests)."""
    http: httpx.Client | None = getattr(_local, "client", None)
    if http is None:
        http = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))
        _local.client = http
    return http


def get(url: str, **kwargs: Any) -> httpx.Response:
    return client().get(url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return client().post(url, **kwargs)
