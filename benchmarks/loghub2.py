"""Grouping accuracy on all sixteen loghub-2.0 systems (corrected labels): ours, Drain3 and Brain, same run.

The data is vendored in `benchmarks/corpus/loghub2` (its README says from which commit; LICENSE.txt,
CITATION). Run:

    python -m benchmarks.loghub2                       # the table
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
import subprocess
import sys
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
    systems = tuple(argv) or SYSTEMS
    print(table(run(CORPUS, systems)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
