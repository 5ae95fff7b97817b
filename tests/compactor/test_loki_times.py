"""Each kept log pattern keeps its first and last times (invariant 6); one-off patterns are left out,
and counted, before any kept pattern loses them.

Found live (issue 18): with the services' JSON log lines the 300-token digest kept ten 1x start-up
patterns and stripped the first/last time of its largest pattern (250 refusals); the times came back
only at 900 tokens. The raw here is built like that run's: JSON lines, one stream per service."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from schemas.tokens import count_value_tokens
from services.compaction import loki
from services.compaction.fit import fit
from services.compaction.model import BUDGET_FLOOR, Draft, Item
from services.compaction.registry import compact_tool_result

T0 = datetime(2026, 12, 3, 13, 25, 15, tzinfo=UTC)
TIMED = re.compile(r"^(\d+)× (\d\d-\d\d )?\d\d:\d\d:\d\d(\.\d+)?(–(\d\d-\d\d )?\d\d:\d\d:\d\d(\.\d+)?)? ")
COUNT = re.compile(r"^(\d+)×")
OMITTED = re.compile(r"^(\d+) patterns, (\d+) lines")
START_UP: tuple[tuple[str, str, dict[str, object]], ...] = (
    ("projector", "kafka access checked", {"kafka": "127.0.0.1:29092", "protocol": "PLAINTEXT"}),
    ("projector", "projecting incident.compacted.bafbf58dc5f9 into schema t_live_bafbf58dc5f9", {}),
    ("projector", "assigned", {"topic": "incident.compacted.bafbf58dc5f9", "partitions": "0,1,2"}),
    ("ingest", "kafka access checked", {"kafka": "127.0.0.1:29092", "protocol": "PLAINTEXT"}),
    ("ingest", "Started server process [4242]", {"color_message": "Started server process"}),
    ("ingest", "Waiting for application startup.", {}),
    ("ingest", "warmed", {"kafka_metadata_s": 0.012, "read_model_s": 0.034}),
    ("ingest", "Application startup complete.", {"logger": "uvicorn.error"}),
    ("compactor", "partitions assigned", {"topic": "incident.events.bafbf58dc5f9"}),
    ("agent", "agent starting", {"mcp": "telemetry-mcp --backend http"}),
)


def _count(pattern: str) -> int:
    """The N of a pattern's "N×"."""
    counted = COUNT.match(pattern)
    assert counted is not None, pattern
    return int(counted[1])


def _line(at: datetime, service: str, msg: str, **fields: object) -> tuple[int, str]:
    record = {"ts": at.isoformat(timespec="milliseconds"), "level": "info", "service": service,
              "logger": f"incident_memory.{service}", "msg": msg, "thread_ts": None, "message_id": None,
              **fields}  # fmt: skip
    return int(at.timestamp() * 1000) * 1_000_000, json.dumps(record)


def _service_logs() -> dict[str, object]:
    by_service: dict[str, list[tuple[int, str]]] = {}
    for k, (service, msg, fields) in enumerate(START_UP):
        by_service.setdefault(service, []).append(
            _line(T0 + timedelta(milliseconds=37 * k), service, msg, **fields)
        )
    refusals = [
        (
            T0 + timedelta(seconds=25 + 0.2 * i),
            "bad_token",
            "expected Authorization: Bearer <ALERTMANAGER_TOKEN>",
        )
        for i in range(250)
    ] + [(T0 + timedelta(seconds=50 + i / 3), "missing_field", "groupKey") for i in range(45)]
    for at, reason, detail in refusals:
        by_service["ingest"].append(
            _line(at, "ingest", "rejected", endpoint="alertmanager", reason=reason, detail=detail)
        )
    result = [
        {"stream": {"namespace": "incident-memory", "container": service},
         "values": [[str(ns), line] for ns, line in sorted(values, reverse=True)]}
        for service, values in by_service.items()
    ]  # fmt: skip
    return {"status": "success", "data": {"resultType": "streams", "result": result}}


def _hms(at: datetime) -> str:
    return at.strftime("%H:%M:%S")


def test_the_largest_patterns_keep_their_times_and_the_one_offs_are_counted() -> None:
    raw = _service_logs()
    out = compact_tool_result("query_loki", raw, {"evidence_id": "1796304420.628023:1:tools:0"}, budget=300)
    patterns = out.compact["patterns"]
    assert out.tokens == count_value_tokens(out.compact) <= 300
    first_bad, last_bad = T0 + timedelta(seconds=25), T0 + timedelta(seconds=25 + 0.2 * 249)
    assert patterns[0].startswith(
        f"250× {_hms(first_bad)}–{_hms(last_bad)} [container ingest only] rejected "
    ), patterns[0]
    assert "bad_token" in patterns[0]
    first_missing, last_missing = T0 + timedelta(seconds=50), T0 + timedelta(seconds=50 + 44 / 3)
    assert patterns[1].startswith(
        f"45× {_hms(first_missing)}–{_hms(last_missing)} [container ingest only] rejected "
    ), patterns[1]
    assert "missing_field" in patterns[1]
    for pattern in patterns:
        assert TIMED.match(pattern), pattern  # every kept pattern, not only the largest
    # what is left out is one-off start-up lines, counted exactly
    omitted = OMITTED.match(out.compact["omitted"])
    assert omitted is not None
    assert int(omitted[1]) == int(omitted[2]) == 10 - (len(patterns) - 2)
    assert sum(_count(p) for p in patterns) + int(omitted[2]) == 305


def test_at_every_budget_the_largest_keeps_its_times_and_no_one_off_is_kept_while_times_go() -> None:
    raw = _service_logs()
    for budget in range(BUDGET_FLOOR, 901, 15):
        out = compact_tool_result(
            "query_loki", raw, {"evidence_id": "1796304420.628023:1:tools:0"}, budget=budget
        )
        patterns = out.compact["patterns"]
        assert out.tokens <= budget
        assert TIMED.match(patterns[0]) and patterns[0].startswith("250× "), (budget, patterns[0])
        stripped = [p for p in patterns if not TIMED.match(p)]
        one_offs = [p for p in patterns if p.startswith("1× ")]
        assert not (stripped and one_offs), (budget, patterns)


def _item(id_: str, n: int, *, minor: bool = False, pinned: bool = False) -> Item:
    timed = f"{n}× 03:00:00–03:59:59 pattern {id_} " + "word " * 6
    return Item(
        id=id_, forms=(timed, f"{n}× pattern {id_}"), essential=0, n=n, minor=minor, pinned=pinned,
        level="error" if pinned else "info",
    )  # fmt: skip


def test_fit_leaves_out_minor_items_before_any_kept_item_loses_its_essential_form() -> None:
    draft = Draft(headers=({"evidence": "e"},), section="patterns", kind="patterns", unit="lines", items=())
    items = [_item("a", 500), _item("b", 400), *(_item(f"m{k}", 1, minor=True) for k in range(20))]
    fitted = fit(draft, items, 90)
    assert fitted is not None
    kept = fitted.compact["patterns"]
    assert kept[:2] == [items[0].forms[0], items[1].forms[0]]  # both large ones with their times
    assert all(k in {it.forms[0] for it in items} for k in kept)  # nothing without its times
    # when the large ones cannot all keep their times, the minor ones go first, then times, in order
    many = [_item(f"big{k}", 100 - k) for k in range(8)] + [_item(f"m{k}", 1, minor=True) for k in range(5)]
    fitted = fit(draft, many, 110)
    assert fitted is not None
    kept = fitted.compact["patterns"]
    assert not any(" pattern m" in k for k in kept), kept
    assert len(kept) == 8 and kept[0] == many[0].forms[0], kept
    # a pinned item is never dropped for its essential form: the last resort keeps it, without it
    errors = [_item(f"e{k}", 10, pinned=True) for k in range(6)]
    fitted = fit(draft, errors, 80)
    assert fitted is not None and fitted.kept == 6


def test_every_loki_item_names_its_timed_form_as_essential() -> None:
    draft = loki.draft(_service_logs(), {}, "e")
    for item in draft.items:
        assert all(TIMED.match(f) for f in item.forms[: item.least + 1]), item.forms
        assert not any(TIMED.match(f) for f in item.forms[item.least + 1 :]), item.forms
    assert [it.minor for it in draft.items[:2]] == [False, False]
    assert all(it.minor for it in draft.items[2:])
