"""Compactor quality: do digests fit, and do they keep their facts, on data they were never tuned to?

Two parts, both pure (no broker, no database):

1. **Real logs.** The eight loghub systems vendored in `benchmarks/corpus/loghub` (2,000
   production lines each, templates labelled by people; see its LICENSE and CITATION). Per
   system and budget: whether the Loki digest fits, its tokens, the raw/digest ratio and the
   facts kept (the rule of `benchmarks/corpus/check_loki_digests.py`: the total, the five
   largest templates' exact counts, the largest error templates' counts). Beside it, grouping
   accuracy (Zhu et al., ICSE-SEIP 2019: a line counts when its group is exactly its labelled
   template's) of the compactor's own grouping on full lines as Loki returns them, and of
   Drain3 (PyPI `drain3`, default settings) in the same run, on the same full lines and on the
   labelled message content.
2. **Other tools, on shapes the seed never had** (`deploy.local.seed.shapes`), and the seed itself:
   per digest, whether it fits its default budget and whether its named facts survive.
"""

from __future__ import annotations

import csv
import gzip
import json
import logging
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.corpus.check_loki_digests import facts_kept
from deploy.local.seed import shapes
from schemas.events import canonical_json
from schemas.tokens import count_tokens
from services.compaction.loki import line_patterns
from services.compaction.registry import DEFAULT_BUDGETS, compact_tool_result

CORPUS = Path(__file__).parent / "corpus" / "loghub"
BUDGETS = (150, 300, 600)


def grouping_accuracy(predicted: Sequence[object], truth: Sequence[str]) -> float:
    """Share of lines whose predicted group is exactly the set of lines of their labelled template."""
    by_group: dict[object, list[int]] = defaultdict(list)
    by_truth: dict[str, set[int]] = defaultdict(set)
    for index, (p, t) in enumerate(zip(predicted, truth, strict=True)):
        by_group[p].append(index)
        by_truth[t].add(index)
    right = 0
    for members in by_group.values():
        labels = {truth[i] for i in members}
        if len(labels) == 1 and by_truth[next(iter(labels))] == set(members):
            right += len(members)
    return right / len(truth) if truth else 1.0


def drain3_groups(texts: Sequence[str]) -> list[int]:
    """Drain3's clusters (default config), each text matched against the final templates."""
    from drain3 import TemplateMiner
    from drain3.template_miner_config import TemplateMinerConfig

    logging.getLogger("drain3").setLevel(logging.ERROR)
    config = TemplateMinerConfig()
    config.profiling_enabled = False
    miner = TemplateMiner(config=config)
    first = [miner.add_log_message(t)["cluster_id"] for t in texts]
    out = []
    for text, cluster in zip(texts, first, strict=True):
        match = miner.match(text)
        out.append(match.cluster_id if match is not None else cluster)
    return out


def _labels(system: str) -> tuple[dict[str, str], list[str], list[str]]:
    """(line -> template id, the labelled message contents, their template ids), from the corpus."""
    src = CORPUS / "src" / system
    lines = (src / f"{system}_2k.log").read_text(encoding="utf-8", errors="replace").split("\n")
    with open(src / f"{system}_2k.log_structured.csv", encoding="utf-8", errors="replace", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return (
        {line: row["EventId"] for line, row in zip(lines, rows, strict=False)},
        [row["Content"] for row in rows],
        [row["EventId"] for row in rows],
    )


def loghub() -> list[dict[str, Any]]:
    results = []
    for facts_path in sorted(CORPUS.glob("*.facts.json")):
        facts = json.loads(facts_path.read_text())
        system = facts["system"]
        with gzip.open(CORPUS / f"{system}.loki.json.gz", "rt") as fh:
            raw = json.load(fh)
        label_of, contents, content_labels = _labels(system)
        started = time.process_time()
        ours = line_patterns(raw)
        group_ms = (time.process_time() - started) * 1000
        lines = [line for line, _ in ours]
        truth = [label_of[line] for line in lines]
        row: dict[str, Any] = {
            "system": system,
            "lines": len(lines),
            "raw_tokens": count_tokens(canonical_json(raw)),
            "ga_ours": grouping_accuracy([p for _, p in ours], truth),
            "ga_drain3_full": grouping_accuracy(drain3_groups(lines), truth),
            "ga_drain3_content": grouping_accuracy(drain3_groups(contents), content_labels),
            "group_ms": group_ms,
            "budgets": {},
        }
        for budget in BUDGETS:
            started = time.process_time()
            out = compact_tool_result("query_loki", raw, {}, budget=budget)
            cpu_ms = (time.process_time() - started) * 1000
            found, total, lost = facts_kept(out.compact, facts)
            row["budgets"][budget] = {
                "tokens": out.tokens,
                "fits": out.tokens <= budget,
                "ratio": row["raw_tokens"] / out.tokens,
                "facts": found,
                "facts_total": total,
                "lost": lost,
                "cpu_ms": cpu_ms,
            }
        results.append(row)
    return results


def other_tools() -> list[dict[str, Any]]:
    rows = []
    for case in shapes.cases():
        out = compact_tool_result(case.tool, case.raw, case.alert_context)
        text = canonical_json(out.compact)
        missing = [fact for fact in case.facts if fact not in text]
        rows.append(
            {
                "case": case.name,
                "tool": case.tool,
                "budget": DEFAULT_BUDGETS[case.tool],
                "tokens": out.tokens,
                "fits": out.tokens <= DEFAULT_BUDGETS[case.tool],
                "raw_tokens": out.raw_tokens,
                "facts": len(case.facts) - len(missing),
                "facts_total": len(case.facts),
                "missing": missing,
            }
        )
    return rows


def run(settings: Any = None) -> dict[str, Any]:
    logs = loghub()
    tools = other_tools()
    lines = [
        "## Compactor quality: real logs and unseen shapes\n",
        "Loki digests of the eight loghub systems (`benchmarks/corpus/loghub`, 2,000 real lines each, "
        "templates labelled by people). *facts*: the rule of `benchmarks/corpus/check_loki_digests.py` "
        "(the total, the five largest templates' exact counts with a word of theirs, the largest error "
        "templates' counts). *GA*: grouping accuracy against the labels, on full lines as Loki returns them; "
        "Drain3 (default settings) in the same run, on the same lines and on the labelled message content.\n",
        "| system | lines | raw tokens | GA ours | GA Drain3 (full lines) | GA Drain3 (content) | "
        + " | ".join(f"{b}: tokens / ratio / facts" for b in BUDGETS)
        + " |",
        "|---|---:|---:|---:|---:|---:|" + "---|" * len(BUDGETS),
    ]
    for row in logs:
        cells = []
        for budget in BUDGETS:
            b = row["budgets"][budget]
            mark = "" if b["fits"] else " **over**"
            cells.append(f"{b['tokens']}{mark} / {b['ratio']:.0f}x / {b['facts']}/{b['facts_total']}")
        lines.append(
            f"| {row['system']} | {row['lines']} | {row['raw_tokens']:,} | {row['ga_ours']:.3f} | "
            f"{row['ga_drain3_full']:.3f} | {row['ga_drain3_content']:.3f} | " + " | ".join(cells) + " |"
        )
    summary: dict[str, Any] = {
        "ga_ours": statistics.mean(r["ga_ours"] for r in logs),
        "ga_drain3_full": statistics.mean(r["ga_drain3_full"] for r in logs),
        "ga_drain3_content": statistics.mean(r["ga_drain3_content"] for r in logs),
    }
    for budget in BUDGETS:
        summary[f"fits_{budget}"] = sum(r["budgets"][budget]["fits"] for r in logs)
        summary[f"facts_{budget}"] = sum(r["budgets"][budget]["facts"] for r in logs)
        summary[f"facts_total_{budget}"] = sum(r["budgets"][budget]["facts_total"] for r in logs)
    fact_cells = " | ".join(
        f"{summary[f'fits_{b}']}/{len(logs)} fit, {summary[f'facts_{b}']}/{summary[f'facts_total_{b}']} facts"
        for b in BUDGETS
    )
    lines.append(
        f"| **mean / total** | | | **{summary['ga_ours']:.3f}** | {summary['ga_drain3_full']:.3f} | "
        f"{summary['ga_drain3_content']:.3f} | {fact_cells} |"
    )
    lost = [
        f"{r['system']}: {', '.join(r['budgets'][300]['lost'])}" for r in logs if r["budgets"][300]["lost"]
    ]
    if lost:
        lines.append("\nFacts lost at 300 tokens: " + "; ".join(lost) + ".")
    cpu = statistics.median(r["budgets"][300]["cpu_ms"] for r in logs)
    lines.append(f"\nMedian CPU time of one 2,000-line digest at 300 tokens: {cpu:.0f} ms.\n")
    lines += [
        "Other tools on shapes the seed never had, and the seed, at the default budgets:\n",
        "| case | tool | budget | tokens | raw tokens | facts kept | missing |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for row in tools:
        mark = "" if row["fits"] else " **over**"
        lines.append(
            f"| {row['case']} | {row['tool']} | {row['budget']} | {row['tokens']}{mark} | {row['raw_tokens']:,} | "
            f"{row['facts']}/{row['facts_total']} | {', '.join(row['missing']) or '—'} |"
        )
    return {
        "title": "Compactor quality",
        "markdown": "\n".join(lines) + "\n",
        "summary": summary,
        "loghub": logs,
        "tools": tools,
    }


if __name__ == "__main__":
    print(run()["markdown"])
