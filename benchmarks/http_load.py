"""The benchmarks' HTTP load generator: open loop, pre-built requests, keep-alive connections.

Request i is due at start + i/rate whatever happened before it, so a slow server shows up as latency
(and a missed rate) instead of silently slowing the generator. The client is a minimal HTTP/1.1
keep-alive client on asyncio streams, on uvloop when installed: an off-the-shelf async client costs
more CPU per request than the server under test, and on a 2-core machine the generator's CPU is taken
from what it measures. Requests are built and signed before the clock starts (well inside Slack's
5-minute window), so the clock covers I/O only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from services.ingest.slack_signature import sign

T = TypeVar("T")


def signed_slack_request(secret: str, body: bytes, path: str = "/slack/events") -> bytes:
    """A whole HTTP/1.1 request carrying `body`, signed as Slack signs its Events API requests."""
    stamp = str(int(time.time()))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nX-Slack-Request-Timestamp: {stamp}\r\n"
        f"X-Slack-Signature: {sign(secret, stamp, body)}\r\n\r\n"
    ).encode()
    return head + body


@dataclass
class Outcome:
    """Per request i: its status (-1: no answer in time, or the connection failed), when it was written (wall clock, to compare
    with Kafka's timestamps) and how long its answer took; plus the whole run's span."""

    statuses: list[int]
    sent_at: list[float]
    ack: list[float] = field(default_factory=list)  # write -> response, seconds
    due: list[float] = field(default_factory=list)  # scheduled time -> response (includes queueing)
    elapsed: float = 0.0


async def load(
    port: int, requests: list[bytes], rate: float, connections: int, timeout: float = 10.0
) -> Outcome:
    """Send `requests` at `rate` per second over `connections` keep-alive connections. A request not
    answered within `timeout` s (or whose connection fails) gets status -1 and a new connection: every
    wait is bounded, so a stalled server is a figure, never a hung run."""
    queue: asyncio.Queue[tuple[int, float] | None] = asyncio.Queue()
    out = Outcome(statuses=[0] * len(requests), sent_at=[0.0] * len(requests))
    started = time.perf_counter()

    async def connection() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while (item := await queue.get()) is not None:
            i, scheduled = item
            sent = time.perf_counter()
            out.sent_at[i] = time.time()
            try:
                writer.write(requests[i])
                out.statuses[i] = await asyncio.wait_for(read_status(reader), timeout)
            except (OSError, asyncio.IncompleteReadError, ValueError):  # TimeoutError is an OSError
                out.statuses[i] = -1
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            done = time.perf_counter()
            out.ack.append(done - sent)
            out.due.append(done - scheduled)
        writer.close()

    workers = [asyncio.create_task(connection()) for _ in range(connections)]
    for i in range(len(requests)):
        scheduled = started + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0.0005:
            await asyncio.sleep(delay)
        queue.put_nowait((i, scheduled))
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.gather(*workers)
    out.elapsed = time.perf_counter() - started
    return out


async def read_status(reader: asyncio.StreamReader) -> int:
    status = int((await reader.readline()).split(b" ", 2)[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """uvloop when installed (the generator must not be the bottleneck), asyncio otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
