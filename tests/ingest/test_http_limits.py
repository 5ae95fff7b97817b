"""HTTP bounds of `incident-memory ingest` (issue 17, services/ingest/http_limits.py), on raw sockets
against the real CLI in a subprocess, with short timeouts given on its command line.

No broker is needed: Kafka is a closed port (ingest answers 503 to what would produce), and the
requests here either stop before the app or are ones the app answers without Kafka (`/metrics`,
a signed `url_verification`)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from deploy.local.pipeline import Pipeline, Proc, http_ok
from schemas.topics import COMPACTED, DLQ, EVENTS, WAKE

from .helpers import CLOSED_PORT_BOOTSTRAP, SECRET, TOKEN, WORKSPACE_ENV, dumps, signed_headers

TIMEOUT = 1.0  # the header, body and keep-alive timeouts of the server under test
# Every case runs against one-second timeouts and several bound the elapsed time: alone, not under -n.
pytestmark = pytest.mark.serial


@dataclass
class Ingest:
    port: int
    proc: Proc

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _BUFFERED.pop(sock.fileno(), None)
        return sock

    def metric(self, name: str, **labels: str) -> float:
        return self.proc.metric(name, **labels)


def _start(tmp: Path, *flags: str) -> Ingest:
    """ingest with Kafka a closed port: /healthz says 503, so it is ready when /metrics answers."""
    topics = {"events": EVENTS, "compacted": COMPACTED, "wake": WAKE, "dlq": DLQ}
    pipe = Pipeline(CLOSED_PORT_BOOTSTRAP, "", "limits", topics, tmp, extra_env={"SLACK_SIGNING_SECRET": SECRET,
                    "ALERTMANAGER_TOKEN": TOKEN, **WORKSPACE_ENV})  # fmt: skip
    proc = pipe.ingest(schema=False, extra=["--log-level", "WARNING", *flags])
    assert proc.port is not None
    proc.ready = http_ok(f"http://127.0.0.1:{proc.port}/metrics")
    return Ingest(proc.port, proc.wait_ready(30, every=0.05))


def _stop(ingest: Ingest) -> None:
    ingest.proc.stop(20)


@pytest.fixture(scope="module")
def ingest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ingest]:
    t = str(TIMEOUT)
    server = _start(tmp_path_factory.mktemp("limits"), "--header-timeout", t, "--body-timeout", t,
                    "--keep-alive-timeout", str(int(TIMEOUT)))  # fmt: skip
    try:
        yield server
    finally:
        _stop(server)


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    closed: bool  # the server closed the connection after it


def read_answer(sock: socket.socket, timeout: float = 10.0) -> Answer:
    """One response (its Content-Length), then whether the server closed the connection after it.
    Bytes read past the response (a pipelined one) are kept for the next call on this socket."""
    sock.settimeout(timeout)
    data = _BUFFERED.pop(sock.fileno(), b"")
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a response: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed inside the body"
        rest += chunk
    body, rest = rest[:length], rest[length:]
    if rest:
        _BUFFERED[sock.fileno()] = rest
        closed = False
    elif headers.get("connection") == "close":
        closed = _closed(sock, 5.0)
    else:
        closed = False  # kept alive (the idle tests wait for its close themselves)
    return Answer(int(lines[0].split()[1]), headers, body, closed)


_BUFFERED: dict[int, bytes] = {}


def _closed(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def _wait_closed(sock: socket.socket, limit: float) -> float:
    """Seconds until the server closes this (silent) connection; fails past `limit`."""
    started = time.monotonic()
    assert _closed(sock, limit), f"still open after {limit} s"
    return time.monotonic() - started


GET = b"GET /metrics HTTP/1.1\r\nHost: ingest\r\n"


def test_a_header_over_32_kib_is_431_at_once_and_closed(ingest: Ingest) -> None:
    before = ingest.metric("ingest_http_refused_total", status="431", reason="header_too_large")
    with ingest.connect() as sock:
        started = time.monotonic()
        sock.sendall(GET + b"X-Big: " + b"a" * 40_000 + b"\r\n\r\n")
        answer = read_answer(sock)
    assert answer.status == 431 and answer.closed
    assert json.loads(answer.body) == {"ok": False, "error": "header_too_large"}
    assert time.monotonic() - started < 1.0
    assert ingest.metric("ingest_http_refused_total", status="431", reason="header_too_large") == before + 1


def test_a_header_that_never_ends_is_refused_at_the_limit_not_read_to_its_end(ingest: Ingest) -> None:
    """32 MB of one header, with no end: refused once 32 KiB were read, so the sender is cut off
    (reset) once the kernel's socket buffers are full, long before it could send the rest; the
    server stays responsive (before the limit, 100 MB took ~10 s of the event loop)."""
    with ingest.connect() as sock:
        started = time.monotonic()
        sent = 0
        with pytest.raises(OSError):  # BrokenPipe / ConnectionReset: the server closed on us
            sock.sendall(GET + b"X-Big: ")
            for _ in range(32 * 16):
                sock.sendall(b"a" * 65536)
                sent += 65536
        assert sent < 32 * 1024 * 1024
    assert time.monotonic() - started < 2.0
    assert httpx.get(f"http://127.0.0.1:{ingest.port}/metrics", timeout=1).status_code == 200


def test_a_head_just_under_the_limit_is_served(ingest: Ingest) -> None:
    with ingest.connect() as sock:
        sock.sendall(GET + b"X-Big: " + b"a" * 30_000 + b"\r\n\r\n")
        assert read_answer(sock).status == 200


def test_more_than_100_headers_is_431_and_100_are_served(ingest: Ingest) -> None:
    def headers(n: int) -> bytes:  # Host + n - 1 others
        return GET + b"".join(b"X-%d: y\r\n" % i for i in range(n - 1)) + b"\r\n"

    with ingest.connect() as sock:
        sock.sendall(headers(100))
        assert read_answer(sock).status == 200
    before = ingest.metric("ingest_http_refused_total", status="431", reason="too_many_headers")
    with ingest.connect() as sock:
        sock.sendall(headers(101))
        answer = read_answer(sock)
    assert answer.status == 431 and answer.closed
    assert json.loads(answer.body)["error"] == "too_many_headers"
    assert ingest.metric("ingest_http_refused_total", status="431", reason="too_many_headers") == before + 1


@pytest.mark.slow
def test_slowloris_headers_are_408_after_the_header_timeout(ingest: Ingest) -> None:
    """One header line every 0.2 s (each resets an idle timer, none ends the head)."""
    before = ingest.metric("ingest_http_refused_total", status="408", reason="header_timeout")
    with ingest.connect() as sock:
        started = time.monotonic()
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        answered = b""
        sock.settimeout(0.2)
        for i in range(50):  # up to 10 s
            try:
                sock.sendall(b"X-Slow-%d: y\r\n" % i)
                answered = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            break
        elapsed = time.monotonic() - started
    assert answered.startswith(b"HTTP/1.1 408 "), answered
    assert b'"header_timeout"' in answered
    assert TIMEOUT * 0.9 <= elapsed < TIMEOUT + 1.5
    assert ingest.metric("ingest_http_refused_total", status="408", reason="header_timeout") == before + 1


@pytest.mark.slow
def test_a_connection_that_sends_nothing_is_closed_after_the_keep_alive_timeout(ingest: Ingest) -> None:
    before = ingest.metric("ingest_http_closed_total", reason="idle")
    with ingest.connect() as sock:
        assert TIMEOUT * 0.9 <= _wait_closed(sock, TIMEOUT + 2) < TIMEOUT + 1.5
    assert ingest.metric("ingest_http_closed_total", reason="idle") == before + 1


@pytest.mark.slow
def test_an_idle_keep_alive_connection_is_closed_after_the_timeout(ingest: Ingest) -> None:
    with ingest.connect() as sock:
        sock.sendall(GET + b"\r\n")
        answer = read_answer(sock)
        assert answer.status == 200 and not answer.closed
        sock.sendall(GET + b"\r\n")  # a second request on the same connection is served
        assert read_answer(sock).status == 200
        assert _wait_closed(sock, TIMEOUT + 2) < TIMEOUT + 1.5


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "auth"),
    [("/alertmanager", f"Authorization: Bearer {TOKEN}\r\n".encode()), ("/slack/events", b"")],
    ids=["alertmanager", "slack"],
)
def test_a_body_shorter_than_its_content_length_is_408_after_the_body_timeout(
    ingest: Ingest, path: str, auth: bytes
) -> None:
    before = ingest.metric("ingest_http_refused_total", status="408", reason="body_timeout")
    with ingest.connect() as sock:
        started = time.monotonic()
        sock.sendall(b"POST %s HTTP/1.1\r\nHost: ingest\r\n%sContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{}" % (path.encode(), auth))  # fmt: skip
        answer = read_answer(sock, timeout=TIMEOUT + 3)
        elapsed = time.monotonic() - started
    assert answer.status == 408 and answer.closed
    assert json.loads(answer.body)["error"] == "body_timeout"
    assert TIMEOUT * 0.9 <= elapsed < TIMEOUT + 1.5
    assert ingest.metric("ingest_http_refused_total", status="408", reason="body_timeout") == before + 1


def test_a_signed_request_sent_in_pieces_within_the_timeouts_is_answered(ingest: Ingest) -> None:
    body = dumps({"token": "x", "challenge": "c" * 20, "type": "url_verification"})
    head = "".join(f"{k}: {v}\r\n" for k, v in signed_headers(body).items())
    request = (f"POST /slack/events HTTP/1.1\r\nHost: ingest\r\n{head}Content-Length: {len(body)}\r\n\r\n"
               .encode() + body)  # fmt: skip
    with ingest.connect() as sock:
        for i in range(0, len(request), 40):  # ~0.3 s in all: under every timeout
            sock.sendall(request[i : i + 40])
            time.sleep(0.03)
        answer = read_answer(sock)
        assert answer.status == 200 and json.loads(answer.body) == {"challenge": "c" * 20}
        sock.sendall(request + request)  # then two more, pipelined on the same connection
        assert [read_answer(sock).status, read_answer(sock).status] == [200, 200]
    reply = httpx.post(
        f"http://127.0.0.1:{ingest.port}/slack/events", content=body, headers=signed_headers(body)
    )
    assert reply.status_code == 200 and reply.json() == {"challenge": "c" * 20}


def test_malformed_http_is_400_and_counted(ingest: Ingest) -> None:
    before = ingest.metric("ingest_http_refused_total", status="400", reason="bad_http")
    with ingest.connect() as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nBad Header\r\n\r\n")
        answer = read_answer(sock)
    assert answer.status == 400 and answer.closed
    assert ingest.metric("ingest_http_refused_total", status="400", reason="bad_http") == before + 1


@pytest.mark.slow
def test_over_max_connections_new_requests_get_503_and_are_counted(tmp_path: Path) -> None:
    server = _start(tmp_path, "--max-connections", "3")
    try:
        held = [server.connect() for _ in range(3)]
        try:
            time.sleep(0.2)  # accepted by the server
            with server.connect() as sock:
                sock.sendall(GET + b"\r\n")
                answer = read_answer(sock)
            assert answer.status == 503 and answer.closed
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.2)
        assert server.metric("ingest_http_refused_total", status="503", reason="over_capacity") == 1
    finally:
        _stop(server)


def test_a_limit_out_of_range_is_one_line_and_exit_1() -> None:
    env = {**os.environ, "SLACK_SIGNING_SECRET": SECRET, "ALERTMANAGER_TOKEN": TOKEN, **WORKSPACE_ENV}
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "ingest", "--port", "0", "--header-timeout", "0"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "header_timeout_s" in lines[0], done.stderr
