"""Headers recognised by their structure, for the formats platform teams' logs come in (issue 36).

Each case is a stream of one message type whose variables (times, pids, ids, hosts) differ from
line to line. The header must be cut off whole (no time, pid or host left in the message) and no
further (the message's first word stays, even when it is a level word such as `Error`), the
level must come from the header, and the lines must mine to one pattern.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from services.compaction.log_anatomy import learn_header, split_line
from services.compaction.log_patterns import mine

Line = Callable[[int], str]

CASES: dict[str, tuple[Line, str | None, str]] = {
    "postgresql error": (
        lambda i: (
            f"2026-03-14 03:12:{i % 60:02d}.{i * 7 % 1000:03d} UTC [{1000 + i * 13}] ERROR:  "
            f'duplicate key value violates unique constraint "orders_pkey" key {i}'
        ),
        "error",
        "duplicate key value",
    ),
    "postgresql log": (
        lambda i: (
            f"2026-03-14 03:12:{i % 60:02d}.{i * 7 % 1000:03d} UTC [{1000 + i * 13}] LOG:  "
            f"checkpoint complete: wrote {i * 3} buffers"
        ),
        "info",
        "checkpoint complete",
    ),
    "postgresql debug": (
        lambda i: (
            f"2026-03-14 03:12:{i % 60:02d}.{i:03d} UTC [{99 + i}] DEBUG2:  autovacuum: processing "
            f"database db{i % 4}"
        ),
        "debug",
        "autovacuum: processing",
    ),
    "syslog rfc3164 carrying klog": (
        lambda i: (
            f"Mar 14 03:12:{i % 60:02d} node-{i % 3} kubelet[{200 + i}]: E0314 03:12:{i % 60:02d}."
            f"{i * 37 % 1000000:06d}    1 pod_workers.go:1298] Error syncing pod {i:04x}"
        ),
        "error",
        "Error syncing pod",
    ),
    "syslog rfc5424": (
        lambda i: (
            f"<134>1 2026-03-14T03:12:{i % 60:02d}.{i:03d}Z host{i % 4} app {300 + i} ID47 - "
            f"connection reset by peer {i}"
        ),
        "info",
        "connection reset",
    ),
    "python logging": (
        lambda i: (
            f"2026-03-14 03:12:{i % 60:02d},{i * 7 % 1000:03d} - payments.worker - ERROR - "
            f"charge failed for order {i}"
        ),
        "error",
        "charge failed",
    ),
    "python logging default": (
        lambda i: f"ERROR:payments.worker:charge failed for order {i}",
        "error",
        "charge failed",
    ),
    "klog": (
        lambda i: (
            f"E0314 03:12:{i % 60:02d}.{i * 37 % 1000000:06d}    {1 + i % 9} reflector.go:138] "
            f"failed to list pods: timeout after {i}s"
        ),
        "error",
        "failed to list pods",
    ),
    "log4j, a message opening with a level word": (
        lambda i: (
            f"[2026-03-14 03:12:{i % 60:02d},{i % 1000:03d}] ERROR [ReplicaFetcher replicaId={i % 3}] "
            f"Error in response for fetch request {i} (kafka.server.ReplicaFetcherThread)"
        ),
        "error",
        "Error in response",
    ),
    "nginx combined": (
        lambda i: (
            f'10.0.{i % 5}.{i % 200} - - [14/Mar/2026:03:12:{i % 60:02d} +0000] "GET /api/orders/{i} '
            f'HTTP/1.1" 502 {100 + i} "-" "curl/8.0"'
        ),
        "error",
        '"GET /api/orders/',
    ),
    "go slog text": (
        lambda i: (
            f'time=2026-03-14T03:12:{i % 60:02d}.{i:03d}Z level=ERROR msg="db connect failed" '
            f'err="dial tcp 10.0.0.{i % 9}:5432: connect: connection refused"'
        ),
        "error",
        "db connect failed",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_header_is_cut_whole_and_no_further(name: str) -> None:
    make, level, opening = CASES[name]
    lines = [make(i) for i in range(40)]
    shape = learn_header(lines)
    parts = [split_line(line, shape) for line in lines]
    assert {p.level for p in parts} == {level}
    assert all(p.message.startswith(opening) for p in parts), parts[0]
    assert len(mine([p.message for p in parts])) == 1


def test_a_level_word_in_a_message_is_not_the_level_of_an_info_line() -> None:
    """`INFO ... Error ...`: the header's level holds, the message's word is the message's."""
    lines = [
        f"2026-03-14 03:12:{i % 60:02d},{i:03d} INFO [main] Error budget at {90 - i % 7}% for slo checkout"
        for i in range(40)
    ]
    parts = [split_line(line, learn_header(lines)) for line in lines]
    assert {p.level for p in parts} == {"info"}
    assert all(p.message.startswith("Error budget") for p in parts)
