"""The dev tooling's server harness and ports: what the stand-ins and the ingest tests rely on."""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from deploy.local import asgi_thread, loopback_http
from deploy.local.ports import free_port, port_in_use

ROOT = Path(__file__).resolve().parents[2]
# `from deploy.local import ports`, `from deploy.local.ports import ...`, `import deploy.local.asgi_thread`
DEV_IMPORT = re.compile(r"^\s*(from|import)\s+deploy\.local(\s+import\s+.*\b|\.)(asgi_thread|ports)\b", re.M)


async def _hello(_request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


def test_running_serves_once_started_and_stopping_frees_the_port() -> None:
    sock, url = asgi_thread.listen()
    port = sock.getsockname()[1]
    app = Starlette(routes=[Route("/", _hello)])
    with asgi_thread.running(asgi_thread.server(app, lifespan="off"), sock, "hello") as serving:
        assert serving.server.started
        assert loopback_http.get(url, timeout=5).text == "hello"
        assert port_in_use(port)
    assert not serving.thread.is_alive()
    assert not port_in_use(port)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # uvicorn's SystemExit(3)
def test_a_server_whose_startup_fails_is_an_error_naming_it() -> None:
    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        raise RuntimeError("startup refused")
        yield

    sock, _url = asgi_thread.listen()
    with pytest.raises(RuntimeError, match="broken-app did not start"):
        asgi_thread.start(asgi_thread.server(Starlette(lifespan=lifespan)), sock, "broken-app")
    assert sock.fileno() == -1  # closed: nothing keeps the port


def test_free_port_is_bindable_and_not_in_use() -> None:
    port = free_port()
    assert not port_in_use(port)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_production_code_does_not_import_the_dev_harness() -> None:
    """deploy/local/demo.py is a dev tool and may; no service and no schema module may."""
    paths = [*(ROOT / "services").rglob("*.py"), *(ROOT / "schemas").rglob("*.py")]
    offenders = [
        str(path.relative_to(ROOT))
        for path in paths
        if path != ROOT / "services" / "demo.py" and DEV_IMPORT.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
