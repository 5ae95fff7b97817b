"""The diff alone (no I/O): changed rows, tokens, lost facts (the planted regression), new failures."""

from __future__ import annotations

import json

from schemas.compact_diff import Row, Snapshot, diff, facts, lost_facts, render

T1, T2 = "1712000000.000100", "1712000001.000100"
LOKI = {
    "evidence": "sha256:6a91c73a6455c55b",
    "summary": "5 lines, 1 patterns (error 5)",
    "window": "2024-03-14 09:00:00.000–09:00:00.000Z",
    "patterns": ["5× 09:00:00.000–09:00:00.000 level=error msg=boom 0 [=boom 0..4]"],
}
# The planted regression: the same digest, its counts gone.
LOKI_NO_COUNT = {
    "evidence": "sha256:6a91c73a6455c55b",
    "window": "2024-03-14 09:00:00.000–09:00:00.000Z",
    "patterns": ["09:00:00.000–09:00:00.000 level=error msg=boom 0 [=boom 0..4]"],
}
LOKI_V2 = {**LOKI, "format": "loki/2"}


def rows(*items: tuple[str, str, object, int]) -> dict[str, Row]:
    return {
        i: Row(i, ts, "tool" if compact is not None else "human", compact, tok)
        for i, ts, compact, tok in items
    }


def before() -> Snapshot:
    return Snapshot(
        "public",
        rows(
            (f"{T1}:-:human:1", T1, None, 12),
            (f"{T1}:1:tools:0", T1, LOKI, 94),
            (f"{T2}:1:tools:0", T2, LOKI, 94),
        ),
    )


def test_an_unchanged_projection_reports_nothing() -> None:
    report = diff(before(), before())
    assert report.regressions == 0
    total = report.total()
    assert (total.tokens_before, total.tokens_after, total.changed) == (200, 200, [])
    assert "no lost facts" in render(report)


def test_an_honest_new_version_changes_rows_and_loses_no_fact() -> None:
    after = Snapshot(
        "v2",
        rows(
            (f"{T1}:-:human:1", T1, None, 12),
            (f"{T1}:1:tools:0", T1, LOKI_V2, 99),
            (f"{T2}:1:tools:0", T2, LOKI_V2, 99),
        ),
    )
    report = diff(before(), after)
    total = report.total()
    assert sorted(total.changed) == [f"{T1}:1:tools:0", f"{T2}:1:tools:0"]
    assert (total.tokens_before, total.tokens_after) == (200, 210)
    assert report.regressions == 0
    assert [(d.thread_ts, d.tokens_before, d.tokens_after) for d in report.threads] == [
        (T1, 106, 111),
        (T2, 94, 99),
    ]


def test_the_planted_regression_is_caught_a_count_that_no_longer_appears() -> None:
    after = Snapshot(
        "regress",
        rows(
            (f"{T1}:-:human:1", T1, None, 12),
            (f"{T1}:1:tools:0", T1, LOKI_NO_COUNT, 80),
            (f"{T2}:1:tools:0", T2, LOKI, 94),
        ),
    )
    report = diff(before(), after)
    t1 = report.threads[0]
    assert t1.changed == [f"{T1}:1:tools:0"]
    lost = t1.lost_facts[f"{T1}:1:tools:0"]
    assert [(f.kind, f.value) for f in lost] == [("count", "5"), ("count", "1")]
    assert report.threads[1].regressions == 0
    assert report.regressions == 2
    table = render(report)
    assert f"lost  {T1}:1:tools:0: count 5" in table
    blob = json.loads(json.dumps(report.to_json()))
    assert blob["total"]["lost_fact_count"] == 2
    assert blob["threads"][0]["lost_facts"][f"{T1}:1:tools:0"][0]["value"] == "5"


def test_a_timestamp_that_no_longer_appears_is_lost() -> None:
    old = {"summary": "x198 in 76 seconds", "first": "2026-03-14T09:02:11Z", "last": "2026-03-14T09:03:27Z"}
    new = {"summary": "x198 in 76 seconds", "first": "2026-03-14T09:02:11Z"}
    assert [(f.kind, f.value) for f in lost_facts(old, new)] == [("timestamp", "2026-03-14T09:03:27Z")]


def test_a_count_moved_elsewhere_is_not_lost_and_hashes_state_no_number() -> None:
    assert lost_facts({"summary": "198 lines"}, {"total_lines": 198}) == []
    assert facts({"evidence": "sha256:6a91c73a6455c55b"}) == []
    assert [(f.kind, f.value) for f in facts({"total": 1234, "note": "1,234 lines x7"})] == [
        ("count", "1234"), ("count", "1234"), ("count", "7"),
    ]  # fmt: skip


def test_new_failures_dead_letters_missing_and_added_rows() -> None:
    error = {"error": "could not be compacted: compactor error: RuntimeError: boom; raw kept as evidence x"}
    after = Snapshot(
        "broken",
        rows(
            (f"{T1}:1:tools:0", T1, error, 30),
            (f"{T2}:1:tools:0", T2, LOKI, 94),
            (f"{T2}:1:tools:1", T2, LOKI, 94),
        ),
        dead_letters={f"{T2}:1:tools:0": "budget exceeded: query_loki: digest is 500 tokens"},
    )
    report = diff(before(), after)
    total = report.total()
    assert total.missing == [f"{T1}:-:human:1"]
    assert total.added == [f"{T2}:1:tools:1"]
    assert total.failing[f"{T1}:1:tools:0"].startswith("could not be compacted")
    assert total.failing[f"{T2}:1:tools:0"].startswith("dead letter: budget exceeded")
    assert total.lost_facts == {}  # a failing row is counted once, as failing
    assert report.regressions == 3
    assert (total.rows_before, total.rows_after) == (3, 3)
    assert "fails" in render(report) and "gone" in render(report)


def test_a_row_that_already_failed_is_not_a_new_failure() -> None:
    error = {"error": "could not be compacted: raw format: not a Loki answer; raw kept as evidence x"}
    old = Snapshot("a", rows((f"{T1}:1:tools:0", T1, error, 30)))
    new = Snapshot("b", rows((f"{T1}:1:tools:0", T1, {**error, "v": 2}, 31)))
    report = diff(old, new)
    assert report.regressions == 0 and report.total().changed == [f"{T1}:1:tools:0"]
