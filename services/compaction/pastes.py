"""Pastes are tool results in disguise: a human message's pasted logs and stack traces, compacted. Pure.

A person who pastes 150 log lines between triple backticks has done a tool call by hand. What the
model is sent of that paste is what the project's compactors make of such a result (invariant 10),
while the human's own words around it stay verbatim and the raw stays whole in `content`:

- a fenced block whose lines carry RFC 3339 timestamps is a log excerpt: it goes through the Loki
  compactor (`query_loki`'s digest: patterns with exact counts, first and last seen, every error
  pattern with an exemplar), at `PASTE_BUDGET` tokens;
- a fenced block holding a stack trace (Python's `File "...", line N`, the JVM's and Node's `at ...`,
  Go's `file.go:N`) keeps every line that is not a frame (the exception, `Caused by:`), the first
  and last frame of each run of frames, and counts the rest, repeated frames counted as such.

Anything else (a command, a config, a short block) is left as written. A paste is replaced only when
its rendering is smaller, so the message is never larger than it was. The caller redacts first
(services/compactor/turns.py), so the digest is drawn from redacted lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from schemas.tokens import count_tokens, render_for_model
from services.compaction.registry import compact_tool_result
from services.compaction.timefmt import ns_from_rfc3339

PASTE_BUDGET = 300  # tokens for one log paste's digest; the turn's own limit still clips the rest
MIN_LINES = 8  # a shorter block is read as written
_FENCE = re.compile(r"```([^\n`]*)\n(.*?)\n?```", re.DOTALL)
_FRAME = re.compile(
    r"^\s*(?:File \"[^\"]+\", line \d+|at [\w$.<>/\[\]:-]+[\s(]|at \S+ \(|at .+:\d+:\d+\)?$|\S+\.go:\d+)"
)
_PY_SOURCE_AFTER_FRAME = re.compile(r"^\s{4,}\S")


def compact_pastes(text: str, evidence_id: str) -> str:
    """`text` with each log or stack-trace paste replaced by its digest; the words between unchanged."""
    out: list[str] = []
    last = 0
    for match in _FENCE.finditer(text):
        body = match.group(2)
        digest = _digest(body, evidence_id)
        if digest is not None and count_tokens(digest) < count_tokens(body):
            out.append(text[last : match.start(2)] + digest + text[match.end(2) : match.end()])
        else:
            out.append(text[last : match.end()])
        last = match.end()
    return "".join(out) + text[last:]


def _digest(body: str, evidence_id: str) -> str | None:
    lines = body.split("\n")
    if len([line for line in lines if line.strip()]) < MIN_LINES:
        return None
    if _frames(lines) * 3 >= len(lines):
        return render_trace(lines, evidence_id)
    raw = loki_raw(lines)
    if raw is None:
        return None
    outcome = compact_tool_result("query_loki", raw, {"evidence_id": evidence_id}, budget=PASTE_BUDGET)
    return f"[{len(lines)} pasted log lines as query_loki's digest]\n{render_for_model(outcome.compact)}"


def loki_raw(lines: Sequence[str]) -> dict[str, Any] | None:
    """The paste as a Loki `query_range` answer, each line at its own leading timestamp (a line without
    one continues the line above); None unless most lines carry a timestamp."""
    values: list[list[str]] = []
    stamped = 0
    for line in lines:
        ns = _leading_ns(line)
        if ns is not None:
            stamped += 1
        elif not values:
            return None
        values.append([str(ns if ns is not None else values[-1][0]), line])
    if stamped * 5 < len(lines) * 4:
        return None
    stream = {"stream": {"source": "paste"}, "values": values}
    return {"status": "success", "data": {"resultType": "streams", "result": [stream]}}


def _leading_ns(line: str) -> int | None:
    head = line.split(maxsplit=1)[0] if line.strip() else ""
    try:
        return ns_from_rfc3339(head)
    except ValueError:
        return None


def _frames(lines: Sequence[str]) -> int:
    return sum(1 for line in lines if _FRAME.match(line))


def render_trace(lines: Sequence[str], evidence_id: str) -> str:
    """A stack trace as its non-frame lines, verbatim, and each run of frames as its first and last
    frame with what is between counted (repeated frames, e.g. a recursion, counted as repeats)."""
    out: list[str] = [f"[stack trace, {len(lines)} lines; get_evidence({evidence_id}) reads it whole]"]
    run: list[str] = []
    for line in lines:
        if _FRAME.match(line) or (run and _FRAME.match(run[-1]) and _PY_SOURCE_AFTER_FRAME.match(line)):
            run.append(line)
            continue
        out.extend(_run_lines(run))
        run = []
        out.append(line)
    out.extend(_run_lines(run))
    return "\n".join(out)


def _run_lines(run: Sequence[str]) -> list[str]:
    """A run of frames: kept whole when short, else first and last with the middle counted."""
    frames = [line for line in run if _FRAME.match(line)]
    if len(frames) <= 4:
        return list(run)
    first, last = _frame_block(run, 0), _frame_block(run, len(run) - 1)
    middle = frames[1:-1]
    distinct = len(set(line.strip() for line in middle))
    repeats = len(middle) - distinct
    note = f"    [... {len(middle)} frames not shown"
    note += f", {repeats} of them repeats of {distinct} distinct" if repeats else ""
    return [*first, note + " ...]", *last]


def _frame_block(run: Sequence[str], index: int) -> list[str]:
    """The frame at `index` (the first or the last) with its Python source line when it has one."""
    if index == 0:
        return [run[0], run[1]] if len(run) > 1 and not _FRAME.match(run[1]) else [run[0]]
    if not _FRAME.match(run[index]) and index > 0:
        return [run[index - 1], run[index]]
    return [run[index]]
