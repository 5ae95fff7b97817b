"""Error patterns come before everything less severe (invariant 6): never left out, never folded into
a group, to make room for a richer header or for info patterns.

Found by tests/agent/test_no_secret_leaves.py: the seed's Loki answer with 38 planted lines (30
`db connect failed` errors whose DSN carries a password, and one line of each other credential) gave a
300-token digest that showed five info patterns while the 30× error pattern sat folded in
`33× ERROR ... other … (4 patterns)`. The fitter had kept the header's window and levels and left out
an error pattern to pay for them, so the only variant that kept all of its errors was the coarsest fold.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from deploy.local.secret_testdata import loki_with_secrets
from deploy.local.seed import seed_incident
from schemas.tokens import count_value_tokens
from services.compaction.fit import fit, omitted_text, render
from services.compaction.model import Draft, Item
from services.compaction.registry import compact_tool_result

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "corpus" / "loghub"
COUNT = re.compile(r"^(\d+)×")
FOLD = re.compile(r"… \(\d+ patterns\)$")


def _seed_with_planted_lines() -> dict[str, Any]:
    """As the whole-pipeline test builds it: the planted lines just before the seed's newest line,
    in the first stream (one pod)."""
    loki = copy.deepcopy(seed_incident().loki)
    stream = loki["data"]["result"][0]
    newest = max(int(ns) for ns, _ in stream["values"])
    planted = [line for _, line in loki_with_secrets()["data"]["result"][0]["values"]]
    stream["values"] = [
        *[[str(newest - 1000 * (i + 1)), line] for i, line in enumerate(planted)],
        *stream["values"],
    ]
    return loki


def _errors_shown(patterns: list[str]) -> int:
    return sum(int(m[1]) for p in patterns if (m := COUNT.match(p)) and re.search(r" (ERROR|FATAL)", p))


@pytest.mark.parametrize(
    "evidence_id",
    [None, "C0123ABCD-1773458070.000100:1:tools:0", "1773458070.000100:12:tools:3"],
)
def test_the_planted_errors_stay_whole_beside_the_seeds_lines(evidence_id: str | None) -> None:
    context = {"evidence_id": evidence_id} if evidence_id else {}
    out = compact_tool_result("query_loki", _seed_with_planted_lines(), context)
    patterns = out.compact["patterns"]
    assert out.tokens <= out.budget
    # Every error line is shown in a pattern of its own: 198 fatal + 30 + 3 one-off errors.
    assert _errors_shown(patterns) == 198 + 33, patterns
    assert not [p for p in patterns if FOLD.search(p)], patterns
    assert re.search(r"^30× [^\n]{0,120}db connect failed", "\n".join(patterns), re.M), patterns
    assert any("remote=https://[REDACTED:github-token]@github.com/acme/orders.git" in p for p in patterns)
    omitted = out.compact.get("omitted", "")
    assert "error" not in omitted and "fatal" not in omitted, omitted
    # Lesser patterns take what room is left: here the largest one.
    assert any(p.startswith("130× request completed") for p in patterns), patterns


def _item(i: int, text: str, *, pinned: bool, n: int = 5) -> Item:
    return Item(id=f"p{i}", forms=(text,), n=n, level="error" if pinned else "info", pinned=pinned)


def _draft(items: list[Item]) -> Draft:
    rich = {"evidence": "e1", "summary": "9 lines", "window": "2026-03-14 03:00:04–03:14:08Z " + "w " * 4}
    terse = {"evidence": "e1", "summary": "9 lines"}
    return Draft(headers=(rich, terse), section="patterns", kind="patterns", unit="lines", items=tuple(items))


def test_a_richer_header_never_costs_a_pinned_item() -> None:
    errors = [_item(i, f"5× ERROR failure number {i} " + "x " * 40, pinned=True) for i in range(3)]
    info = _item(9, "5× info line", pinned=False)
    draft = _draft([*errors, info])
    shown = [e.forms[0] for e in errors]
    # Room for the three errors (and the count of the info line) under the terse header, not under
    # the rich one, itself within a quarter of the budget: the old rule took it and left an error out.
    budget = count_value_tokens(
        render(draft.headers[1], "patterns", shown, omitted_text([info], "patterns", "lines"))
    )
    assert count_value_tokens(dict(draft.headers[0])) + 2 <= budget // 4
    assert count_value_tokens(render(draft.headers[0], "patterns", shown, None)) > budget
    fitted = fit(draft, list(draft.items), budget)
    assert fitted is not None and fitted.kept >= 3, fitted
    assert "window" not in fitted.compact
    assert fitted.compact["patterns"][:3] == [e.forms[0] for e in errors]


def test_the_richer_header_still_wins_over_unpinned_items() -> None:
    infos = [_item(i, f"5× info line number {i} " + "y " * 60, pinned=False) for i in range(3)]
    draft = _draft(infos)
    budget = count_value_tokens(render(draft.headers[1], "patterns", [e.forms[0] for e in infos], None))
    assert count_value_tokens(dict(draft.headers[0])) + 2 <= budget // 4
    fitted = fit(draft, list(draft.items), budget)
    assert fitted is not None and "window" in fitted.compact and fitted.kept < 3


ONE_OFF_ERRORS = (
    "TLS certificate for ledger.internal expired at 2026-03-14T02:59:00Z",
    "cannot allocate memory for batch buffer of 524288 bytes",
    "kafka producer queue full, dropping event payments.captured",
    "redis cluster MOVED slot 4411 to 10.0.3.7:6379 during write",
    "schema registry returned 409 for subject payments-value",
    "dns lookup of fraud-api.shop.svc timed out after 5000ms",
    "circuit breaker opened on card-network after 50 failures",
    "vault lease renewal failed for secret/payments/db",
    "disk /var/lib/payments 97% full on volume pvc-7f3a",
    "grpc deadline exceeded calling risk.Score after 800ms",
)


def _many_errors() -> dict[str, Any]:
    """Two large error patterns, a dozen one-off errors with long distinct lines, and info lines."""
    t0 = 1773457200000000000
    values: list[list[str]] = []
    for i in range(80):
        values.append([str(t0 + i * 10**9), f'level=error msg="payment declined" order={1000 + i}'])
    for i in range(40):
        values.append([str(t0 + i * 10**9 + 5), f'level=error msg="ledger write timeout" shard={i % 7}'])
    for i, message in enumerate(ONE_OFF_ERRORS):
        values.append([str(t0 + 200 * 10**9 + i), f'level=error msg="{message}"'])
    for i in range(60):
        values.append([str(t0 + i * 10**9 + 7), f'level=info msg="request served" path=/api/{i % 5}'])
    result = [{"stream": {"app": "payments", "namespace": "shop"}, "values": values}]
    return {"status": "success", "data": {"resultType": "streams", "result": result}}


def test_a_fold_takes_the_small_errors_and_keeps_the_large_ones_whole() -> None:
    out = compact_tool_result("query_loki", _many_errors(), {}, budget=150)
    patterns = out.compact["patterns"]
    assert out.tokens <= 150
    folds = [p for p in patterns if FOLD.search(p)]
    assert folds, patterns  # the one-off errors do not all fit whole at this budget
    assert any(p.startswith("80× ") and "payment declined" in p for p in patterns), patterns
    assert any(p.startswith("40× ") and "ledger write timeout" in p for p in patterns), patterns
    assert _errors_shown(patterns) == 130, patterns


def test_a_long_tail_of_errors_folds_so_the_largest_lesser_patterns_are_shown() -> None:
    """BGL (loghub): 70 error patterns cannot all be shown whole in 300 tokens, so some fold anyway;
    the fold then goes as far as is worth it, and the largest info patterns (721× `generating core`,
    the story of that log) are shown beside the largest errors, every error line still counted."""
    raw = json.loads(gzip.decompress((CORPUS / "BGL.loki.json.gz").read_bytes()))
    facts = json.loads((CORPUS / "BGL.facts.json").read_text())
    out = compact_tool_result("query_loki", raw, {})
    patterns = out.compact["patterns"]
    assert out.tokens <= out.budget and [p for p in patterns if FOLD.search(p)], patterns
    omitted = out.compact.get("omitted", "")
    assert "error" not in omitted and "fatal" not in omitted, omitted
    for top in facts["top"]:
        assert any(p.startswith(f"{top['count']}× ") and top["token"] in p for p in patterns), (top, patterns)
    for error in facts["errors"][:4]:  # the largest error patterns stay whole
        assert any(p.startswith(f"{error['count']}× ") and error["token"] in p for p in patterns), error
