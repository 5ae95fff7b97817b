"""Pastes compacted at write time (issue 34): logs through the Loki digest, stack traces by their frames,
the human's words verbatim, never larger, redacted first, deterministic (services/compaction/pastes.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.events import HumanMessage
from schemas.tokens import count_tokens
from services.compaction.pastes import _FENCE, compact_pastes
from services.compactor.turns import compact_human

T = "1773458070.000100"
AT = datetime(2026, 3, 14, 3, 0, tzinfo=UTC)


def log_lines(n: int, errors_every: int = 9, service: str = "checkout") -> list[str]:
    return [
        f"{(AT + timedelta(milliseconds=37 * k)).isoformat()} level={'error' if k % errors_every == 0 else 'info'} "
        f'service={service} msg="upstream timeout" latency_ms={50 + (k * 37) % 4950} req={k * 7919:08x}'
        for k in range(n)
    ]


def python_trace(depth: int) -> list[str]:
    frames = [
        f'  File "/app/pay.py", line {10 + i % 3}, in charge\n    return charge(n - 1)' for i in range(depth)
    ]
    return ["Traceback (most recent call last):", *frames, "RecursionError: maximum recursion depth exceeded"]


def fenced(lines: list[str]) -> str:
    return "```\n" + "\n".join(lines) + "\n```"


def test_a_log_paste_becomes_the_loki_digest_with_exact_counts_and_the_words_stay() -> None:
    text = "here's what I see:\n" + fenced(log_lines(150)) + "\nthat's from one pod only"
    out = compact_pastes(text, f"{T}:-:human:1")
    assert out.startswith("here's what I see:\n```\n[150 pasted log lines as query_loki's digest]")
    assert out.endswith("\n```\nthat's from one pod only")
    assert "150 lines, 2 patterns (error 17, info 133)" in out  # every line counted, by level
    assert "17× 03:00:00–03:00:05 ERROR" in out and f'"evidence":"{T}:-:human:1"' in out
    assert count_tokens(out) * 10 < count_tokens(text)


def test_a_stack_trace_keeps_its_exception_its_first_and_last_frames_and_counts_the_rest() -> None:
    text = "boom:\n" + fenced(python_trace(30)) + "\nhelp?"
    out = compact_pastes(text, f"{T}:-:human:2")
    lines = out.splitlines()
    assert lines[2] == f"[stack trace, 62 lines; get_evidence({T}:-:human:2) reads it whole]"
    assert lines[3] == "Traceback (most recent call last):"
    assert lines[4:6] == ['  File "/app/pay.py", line 10, in charge', "    return charge(n - 1)"]
    assert "[... 28 frames not shown, 25 of them repeats of 3 distinct ...]" in lines[6]
    assert lines[7:10] == ['  File "/app/pay.py", line 12, in charge', "    return charge(n - 1)", lines[9]]
    assert lines[9] == "RecursionError: maximum recursion depth exceeded"
    java = ["java.lang.IllegalStateException: pool exhausted"]
    java += [f"\tat com.acme.Pool.get(Pool.java:{40 + i})" for i in range(12)]
    java += [
        "Caused by: java.net.SocketTimeoutException: Read timed out",
        "\tat java.net.Socket.read(S.java:1)",
    ]
    out = compact_pastes(fenced(java), "x")
    assert "java.lang.IllegalStateException: pool exhausted" in out and "Caused by: java.net" in out
    assert "Pool.java:40)" in out and "Pool.java:51)" in out and "[... 10 frames not shown ...]" in out


def test_other_blocks_and_short_pastes_are_left_as_written() -> None:
    yaml = fenced([f"  key{i}: value{i}" for i in range(20)])
    short = fenced(log_lines(5))
    for text in (yaml, short, "no paste at all", "```unclosed\n" + "\n".join(log_lines(30))):
        assert compact_pastes(text, "x") == text


def test_the_paste_is_redacted_before_it_is_compacted_and_the_raw_stays_whole() -> None:
    secret = "postgres://app:hunter2secret@db:5432/pay"
    lines = [f"{line} dsn={secret}" if i % 9 == 0 else line for i, line in enumerate(log_lines(40))]
    text = "look\n" + fenced(lines)
    event = HumanMessage(
        thread_ts=T, message_id=f"{T}:-:human:9", event_time=AT, user="U1", ts="9", text=text
    )
    compact = compact_human(event)
    assert compact is not None and "hunter2secret" not in compact["text"]
    assert "[40 pasted log lines as query_loki's digest]" in compact["text"]
    assert event.row_content()["text"] == text  # the raw, verbatim


_WORDS = st.text(st.characters(blacklist_characters="`", blacklist_categories=["Cs"]), max_size=80)


@st.composite
def messages(draw: st.DrawFn) -> str:
    parts = [draw(_WORDS)]
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["logs", "trace", "other"]))
        if kind == "logs":
            block = log_lines(
                draw(st.integers(1, 60)), draw(st.integers(1, 12)), draw(st.sampled_from(["a", "pay-b"]))
            )
        elif kind == "trace":
            block = python_trace(draw(st.integers(1, 40)))
        else:
            block = draw(st.lists(_WORDS.map(lambda s: s.replace("\n", " ")), max_size=12))
        parts += ["\n" + fenced(block) + "\n", draw(_WORDS)]
    return "".join(parts)


def _outside(text: str) -> list[str]:
    return re.split(_FENCE.pattern, text, flags=re.DOTALL)[0::3]


@settings(max_examples=60, deadline=None)
@given(messages())
def test_never_larger_the_words_outside_unchanged_and_deterministic(text: str) -> None:
    out = compact_pastes(text, f"{T}:-:human:7")
    assert count_tokens(out) <= count_tokens(text)
    assert _outside(out) == _outside(text)
    assert compact_pastes(text, f"{T}:-:human:7") == out
