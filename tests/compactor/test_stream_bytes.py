"""The compactor's output bytes did not move when canonical JSON went through orjson (issue 20).

Every compacted record is compared with the bytes the `json` module gives for the same event
(`reference_json`, the definition), on the loghub corpus, the real Prometheus fixtures, the seed and
the stream benchmark's generated raws: a byte that moved would change hashes and replays
(invariant 8) without a compactor version change.
"""

from __future__ import annotations

import gzip
import json
import typing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deploy.local.seed import (
    generate_events,
    generate_loki,
    generate_prometheus,
    generate_tempo,
    seed_incident,
)
from schemas.canonical import reference_json
from schemas.events import CompactedToolResult, ToolResult
from services.compactor.stream import Compacted, Dead, compacted_bytes, process

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 3, 14, 3, 20, tzinfo=UTC)


def _event(i: int, tool: str, raw: Any, context: dict[str, Any] | None = None) -> bytes:
    ts = f"1773458{i % 400:03d}.000100"
    return ToolResult(
        thread_ts=ts,
        message_id=f"{ts}:1:tools:{i}",
        event_time=NOW,
        round=1,
        tool_call_id=f"call_{i}",
        tool=tool,
        args={"query": "x", "limit": 100},
        raw=raw,
        alert_context=context or {},
    ).to_bytes()


def _records() -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for path in sorted((ROOT / "benchmarks" / "corpus" / "loghub").glob("*.loki.json.gz")):
        out.append(
            (path.name, _event(len(out), "query_loki", json.loads(gzip.decompress(path.read_bytes()))))
        )
    for path in sorted((ROOT / "tests" / "compactor" / "fixtures" / "real").rglob("*.json")):
        raw = json.loads(path.read_text())
        if "data" in raw:  # a query_range response (beside it: how they were recorded)
            out.append((path.name, _event(len(out), "query_prometheus", raw)))
    seed = seed_incident()
    for tool in ("query_loki", "query_prometheus", "get_pod_events", "query_tempo"):
        out.append((f"seed {tool}", _event(len(out), tool, seed.raw_for(tool), seed.alert_context())))
    for i in range(30):
        out.append((f"loki {i}", _event(len(out), "query_loki", generate_loki(i, lines=40, patterns=4))))
        out.append(
            (f"prom {i}", _event(len(out), "query_prometheus", generate_prometheus(i, series=2, points=20)))
        )
        out.append((f"events {i}", _event(len(out), "get_pod_events", generate_events(i, events=8, pods=2))))
        out.append((f"tempo {i}", _event(len(out), "query_tempo", generate_tempo(i))))
    out.append(("tiny floats", _event(len(out), "other", {"f": [1e-5, -3e-9, 1e16, 0.5], "n": None})))
    out.append(("a 71-bit integer", _event(len(out), "other", {"big": 2**70})))
    return out


def test_compacted_bytes_are_the_json_modules_bytes_on_the_corpus_the_fixtures_and_the_seed() -> None:
    records = _records()
    assert len(records) > 130
    for name, value in records:
        out = process(value, key=b"k", topic="in", partition=0, offset=1, recorded=lambda _k: None)
        assert isinstance(out, Compacted), (name, out.letter.reason if isinstance(out, Dead) else out)
        assert out.value == reference_json(out.event.model_dump(mode="json")).encode(), name
        assert out.event.raw == json.loads(value)["raw"], name


def test_a_dead_letters_answer_is_the_json_modules_bytes_too() -> None:
    value = _event(1, "query_loki", {"not": "a loki response", "tiny": 1e-7})
    out = process(value, key=b"k", topic="in", partition=0, offset=1, recorded=lambda _k: None)
    assert isinstance(out, Dead) and out.answer is not None
    answer = CompactedToolResult.model_validate_json(out.answer)
    assert out.answer == reference_json(answer.model_dump(mode="json")).encode()


def test_the_output_fields_hold_no_nan_so_their_nulls_are_nones() -> None:
    """`compacted_bytes` renders the fields as `finite`: it relies on the model having no float-typed
    field, and on pydantic writing a NaN inside `Any` as null in json mode. A NaN in a compact still
    gives the json module's bytes."""
    hints = typing.get_type_hints(CompactedToolResult)
    assert not [name for name, hint in hints.items() if "float" in str(hint)]
    event = CompactedToolResult(
        thread_ts="1.2",
        message_id="1.2:1:tools:0",
        event_time=NOW,
        tool_call_id="c",
        tool="t",
        args={"x": float("nan")},
        raw={"r": [1, None]},
        compact={"ratio": float("nan"), "tiny": 1e-9, "inf": [float("inf")], "none": None},
        tokens=1,
        raw_tokens=1,
        raw_sha256="0",
        compactor_version="v",
        budget=1,
    )
    raw = reference_json(event.raw).encode()
    assert compacted_bytes(event, raw) == reference_json(event.model_dump(mode="json")).encode()
