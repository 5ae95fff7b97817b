"""Grouping accuracy on all sixteen loghub-2.0 systems (corrected labels): ours, Drain3 and Brain, same run.

The data is vendored in `benchmarks/corpus/loghub2` (its README says from which commit; LICENSE.txt,
CITATION). Run:

    python -m benchmarks.loghub2                       # the table
    python -m benchmarks.loghub2 digests [DIR]         # write the 16 systems as check_loki_digests.py input
    python -m benchmarks.loghub2 extract GIT_DIR DIR   # re-vendor from a logpai/loghub-2.0 git mirror

Each system's 2,000 lines become one Loki stream (one line a millisecond, in the log's order) and
are grouped by the compactor (`loki.line_patterns`) on full lines as Loki returns them; Drain3
(default settings) and Brain (`benchmarks.brain`, one threshold for all) group the same full lines
and the labelled message content. Grouping accuracy: `bench_compactor_quality.grouping_accuracy`.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.bench_compactor_quality import drain3_groups, grouping_accuracy
from benchmarks.brain import brain_groups
from services.compaction.loki import line_patterns

CORPUS = Path(__file__).parent / "corpus" / "loghub2"
SYSTEMS = (
    "Android", "Apache", "BGL", "HDFS", "HPC", "Hadoop", "HealthApp", "Linux",
    "Mac", "OpenSSH", "OpenStack", "Proxifier", "Spark", "Thunderbird", "Windows", "Zookeeper",
)  # fmt: skip
# Where a system's 2k sample sits in the loghub-2.0 repository: 2k_dataset lacks Android and Windows,
# which the same repository keeps (corrected labels too) under its LogPPT benchmark.
_FALLBACK = "benchmark/LogPPT/logs"
_T0 = 1773457957000000000
COLUMNS = ("ga_ours_full", "ga_drain3_full", "ga_drain3_content", "ga_brain_full", "ga_brain_content")


def _git_show(git_dir: str, path: str) -> bytes | None:
    shown = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"HEAD:{path}"], capture_output=True)
    return shown.stdout if shown.returncode == 0 else None


def extract(git_dir: str, out: str) -> None:
    """Gzip each system's 2k log and corrected structured labels out of a loghub-2.0 git mirror."""
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    for system in SYSTEMS:
        names = (f"{system}_2k.log", f"{system}_2k.log_structured_corrected.csv")
        for folder in (f"2k_dataset/{system}", f"{_FALLBACK}/{system}"):
            blobs = [_git_show(git_dir, f"{folder}/{name}") for name in names]
            if all(blob is not None for blob in blobs):
                break
        else:
            print(f"loghub2: {system} is not in this mirror, skipped")
            continue
        for name, blob in zip(names, blobs, strict=True):
            (target / f"{name}.gz").write_bytes(gzip.compress(blob or b"", 9, mtime=0))
    for name in ("LICENSE.txt", "CITATION"):
        (target / name).write_bytes(_git_show(git_dir, f"2k_dataset/{name}") or b"")


def load(root: Path, system: str) -> tuple[list[str], list[dict[str, str]]]:
    """(the raw lines, the labelled rows) of one system, line i labelled by row i."""
    with gzip.open(root / f"{system}_2k.log_structured_corrected.csv.gz", "rt", encoding="utf-8") as fh:
        rows = list(csv.DictReader(io.StringIO(fh.read(), newline="")))
    with gzip.open(root / f"{system}_2k.log.gz", "rt", encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")[: len(rows)]
    return lines, rows


def loki_raw(system: str, lines: list[str]) -> dict[str, Any]:
    """The lines as one Loki stream, oldest first, one a millisecond."""
    values = [[str(_T0 + i * 10**6), line] for i, line in enumerate(lines)]
    return {"data": {"resultType": "streams", "result": [{"stream": {"job": system}, "values": values}]}}


# The levels of the labelled `Level` column that are error or worse (Android's `E`, Apache's `error`, BGL's
# `FATAL`, Windows' `Error`, ...); Linux's column of that name holds the host and matches none.
ERROR_LEVELS = frozenset(
    {"e", "f", "error", "fatal", "severe", "critical", "crit", "emerg", "alert", "panic"}
)
_PIECES = re.compile(r"<\*>|[\s:()\[\],=\"']+")


def _fact(event: str, count: int, template: str) -> dict[str, Any]:
    pieces = [p for p in _PIECES.split(template) if p]
    token = max(pieces, key=len) if pieces else None  # the first of the longest: a word of its own
    return {"event": event, "count": count, "token": token, "template": template}


def facts(system: str, rows: list[dict[str, str]]) -> dict[str, Any]:
    """What a faithful digest keeps, as `benchmarks/corpus/loghub/*.facts.json` says it: the total,
    the five largest templates, and the largest templates (up to eight) with a line at error level
    or worse, each with its exact count and a distinctive word."""
    counts = Counter(row["EventId"] for row in rows)
    template = {row["EventId"]: row["EventTemplate"] for row in rows}
    erring = {row["EventId"] for row in rows if row.get("Level", "").strip().lower() in ERROR_LEVELS}
    largest = sorted(counts, key=lambda e: (-counts[e], e))
    return {
        "system": system,
        "total_lines": len(rows),
        "top": [_fact(e, counts[e], template[e]) for e in largest[:5]],
        "errors": [_fact(e, counts[e], template[e]) for e in largest if e in erring][:8],
    }


def write_digest_inputs(root: Path, out: Path) -> None:
    """Each system as `check_loki_digests.py` reads one: `<S>.loki.json.gz` (one stream, newest
    first, as Loki's default `backward` direction returns it) and `<S>.facts.json`."""
    out.mkdir(parents=True, exist_ok=True)
    for system in SYSTEMS:
        lines, rows = load(root, system)
        raw = loki_raw(system, lines)
        raw["data"]["result"][0]["values"].reverse()
        with gzip.open(out / f"{system}.loki.json.gz", "wt", encoding="utf-8") as fh:
            json.dump(raw, fh)
        (out / f"{system}.facts.json").write_text(json.dumps(facts(system, rows), indent=1))


def system_row(root: Path, system: str) -> dict[str, Any]:
    lines, rows = load(root, system)
    truth = [row["EventId"] for row in rows]
    contents = [row["Content"] for row in rows]
    ours = [p for _, p in line_patterns(loki_raw(system, lines))]
    return {
        "system": system,
        "lines": len(lines),
        "ga_ours_full": grouping_accuracy(ours, truth),
        "ga_drain3_full": grouping_accuracy(drain3_groups(lines), truth),
        "ga_drain3_content": grouping_accuracy(drain3_groups(contents), truth),
        "ga_brain_full": grouping_accuracy(brain_groups(lines), truth),
        "ga_brain_content": grouping_accuracy(brain_groups(contents), truth),
    }


def run(root: Path, systems: tuple[str, ...] = SYSTEMS) -> list[dict[str, Any]]:
    return [system_row(root, s) for s in systems if (root / f"{s}_2k.log.gz").is_file()]


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| system | ours (full lines) | Drain3 (full lines) | Drain3 (content) | Brain (full lines) | Brain (content) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    out += [f"| {r['system']} | " + " | ".join(f"{r[c]:.3f}" for c in COLUMNS) + " |" for r in rows]
    means = [sum(r[c] for r in rows) / len(rows) for c in COLUMNS]
    out.append(f"| **mean ({len(rows)})** | " + " | ".join(f"{m:.3f}" for m in means) + " |")
    out.append("| min | " + " | ".join(f"{min(r[c] for r in rows):.3f}" for c in COLUMNS) + " |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if argv[:1] == ["extract"]:
        extract(argv[1], argv[2])
        return 0
    if argv[:1] == ["digests"]:
        out = Path(argv[1] if len(argv) > 1 else ".cache/loghub2_digests")
        write_digest_inputs(CORPUS, out)
        print(f"loghub2: wrote {len(SYSTEMS)} systems to {out}; run check_loki_digests.py {out}")
        return 0
    systems = tuple(argv) or SYSTEMS
    print(table(run(CORPUS, systems)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
