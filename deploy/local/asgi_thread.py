"""An ASGI app served by uvicorn on a background thread: the stand-ins' and the tests' servers.

Dev tooling: nothing under services/ or schemas/ may import it. Ingest's production server runs uvicorn
in the foreground with its HTTP bounds (services/ingest/main.py) and does not need this.

    sock, url = listen(host)         # bound and listening: the URL answers before the app starts
    with running(server(app), sock, "my-standin"):
        ...                          # the server has started; leaving stops it and closes the socket
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import uvicorn
from starlette.types import ASGIApp

from deploy.local.ports import LOOPBACK


def listen(host: str = LOOPBACK, port: int = 0) -> tuple[socket.socket, str]:
    """Bind and listen before serving, so a printed URL already accepts connections; port 0 picks a free
    one. Returns the socket and its `http://host:port` URL, with the host as given."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock, f"http://{host}:{sock.getsockname()[1]}"


def server(
    app: ASGIApp, *, lifespan: Literal["on", "off"] = "on", graceful_s: int | None = 2
) -> uvicorn.Server:
    """uvicorn without its log config or access log. `graceful_s` bounds the wait for open connections
    when stopping (None: wait for them all)."""
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan=lifespan, timeout_graceful_shutdown=graceful_s
    )
    return uvicorn.Server(config)


def serve_cli(server: uvicorn.Server, sock: socket.socket, url: str, banner: str) -> None:
    """A stand-in's CLI, in the foreground: `url` alone on stdout's first line (what a launcher reads),
    `banner` on stderr, then serve until interrupted."""
    print(url, flush=True)
    print(banner, file=sys.stderr, flush=True)
    server.run(sockets=[sock])


@dataclass
class Serving:
    """A server running on its thread, serving `sock`."""

    server: uvicorn.Server
    thread: threading.Thread
    sock: socket.socket

    def stop(self, timeout: float = 15.0) -> None:
        """Ask uvicorn to exit (graceful: in-flight requests finish, the lifespan shuts down), then wait."""
        self.server.should_exit = True
        self.thread.join(timeout=timeout)
        self.sock.close()


def start(server: uvicorn.Server, sock: socket.socket, name: str, timeout: float = 15.0) -> Serving:
    """Run `server` on `sock` in a daemon thread called `name`; return once it has started (its lifespan
    startup done), or raise RuntimeError when it died or did not start within `timeout` seconds."""
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=name)
    serving = Serving(server, thread, sock)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            serving.stop(timeout=1.0)
            raise RuntimeError(f"{name} did not start")
        time.sleep(0.01)
    return serving


@contextlib.contextmanager
def running(server: uvicorn.Server, sock: socket.socket, name: str) -> Iterator[Serving]:
    """`start`, then `stop` on leaving."""
    serving = start(server, sock, name)
    try:
        yield serving
    finally:
        serving.stop()
