"""The compaction inputs whose outputs must stay byte-identical across refactors (issue 35).

Every case is (name, tool, raw, alert_context, budget): the seed incident's four tool results, the
shapes the quality benchmark checks, the vendored loghub corpus at the quality benchmark's budgets,
and samples of the inputs of the core, streams and stream benchmarks. The digest of a case is the
sha256 of the canonical JSON of everything `compact_tool_result` returns that a row or an event
carries (compact, tokens, raw tokens, raw hash, selection, budget, version, ignored ids).

Regenerate (only when a change is MEANT to alter digests, and say so in the commit):
    .venv/bin/python -m tests.compactor.golden_cases > tests/testdata/golden_compacts.json
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.bench_compactor_stream import _raw as stream_raw
from benchmarks.bench_loki_streams import BUDGETS as STREAM_BUDGETS
from benchmarks.bench_loki_streams import answer
from deploy.local.seed import generate_loki, generate_prometheus, generate_tempo, seed_incident, shapes
from schemas.events import canonical_json
from services.compaction.registry import compact_tool_result

ROOT = Path(__file__).resolve().parents[2]
LOGHUB = ROOT / "benchmarks" / "corpus" / "loghub"
GOLDEN = ROOT / "tests" / "testdata" / "golden_compacts.json"
SEED_TOOLS = ("query_loki", "query_prometheus", "get_pod_events", "query_tempo")
LOGHUB_BUDGETS = (150, 300, 600)

Case = tuple[str, str, Any, dict[str, Any], int | None]


def cases() -> Iterator[Case]:
    s = seed_incident()
    for tool in SEED_TOOLS:
        yield f"seed/{tool}", tool, s.raw_for(tool), s.alert_context(), None
    for case in shapes.cases():
        yield f"shapes/{case.name}", case.tool, case.raw, case.alert_context, None
    for path in sorted(LOGHUB.glob("*.loki.json.gz")):
        with gzip.open(path, "rt") as fh:
            raw = json.load(fh)
        for budget in LOGHUB_BUDGETS:
            yield f"loghub/{path.name.split('.')[0]}/{budget}", "query_loki", raw, {}, budget
    for seed in (20_000, 20_001, 20_002):
        yield f"core/loki/{seed}", "query_loki", generate_loki(seed, lines=400, patterns=6), {}, 100_000
    yield "core/prometheus/2", "query_prometheus", generate_prometheus(2, series=500, points=120), {}, 250
    yield "core/tempo/1", "query_tempo", generate_tempo(1, spans=5000, errors=50, services=10), {}, 250
    for seed in range(6):
        raw, _ = answer(seed)
        for budget in STREAM_BUDGETS:
            yield f"streams/{seed}/{budget}", "query_loki", raw, {"evidence_id": f"bench:{seed}"}, budget
    for i in range(6):
        tool, raw = stream_raw(i)
        yield f"stream/{i}", tool, raw, {}, None


def digest(tool: str, raw: Any, alert_context: dict[str, Any], budget: int | None) -> str:
    out = compact_tool_result(tool, raw, alert_context, budget=budget)
    carried = {
        "compact": out.compact,
        "tokens": out.tokens,
        "raw_tokens": out.raw_tokens,
        "raw_sha256": out.raw_sha256,
        "selection": out.selection.model_dump(mode="json") if out.selection else None,
        "budget": out.budget,
        "compactor_version": out.compactor_version,
        "ignored_ids": list(out.ignored_ids),
    }
    return hashlib.sha256(canonical_json(carried).encode()).hexdigest()


def digests() -> dict[str, str]:
    return {name: digest(tool, raw, ctx, budget) for name, tool, raw, ctx, budget in cases()}


if __name__ == "__main__":
    print(json.dumps(digests(), indent=1, sort_keys=True))
