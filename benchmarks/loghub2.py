"""Grouping accuracy on all sixteen loghub-2.0 systems (corrected labels), beside Drain3, same run.

The data is not vendored (logpai/loghub-2.0; see its LICENSE and CITATION): extract it from a git
mirror of that repository into a git-ignored directory, then point the benchmark at it:

    python -m benchmarks.loghub2 extract /path/to/loghub-2.0.git .cache/loghub2
    LOGHUB2_DIR=.cache/loghub2 python -m benchmarks.loghub2

Each system's 2,000 lines become one Loki stream (one line a millisecond, in the log's order) and
are grouped by the compactor (`loki.line_patterns`) on full lines as Loki returns them; Drain3
(default settings) groups the same full lines and the labelled message content. Grouping accuracy:
`bench_compactor_quality.grouping_accuracy`. Skips, saying so, when the data is absent.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.bench_compactor_quality import drain3_groups, grouping_accuracy
from services.compaction.loki import line_patterns

SYSTEMS = (
    "Android", "Apache", "BGL", "HDFS", "HPC", "Hadoop", "HealthApp", "Linux",
    "Mac", "OpenSSH", "OpenStack", "Proxifier", "Spark", "Thunderbird", "Windows", "Zookeeper",
)  # fmt: skip
_T0 = 1773457957000000000


def extract(git_dir: str, out: str) -> None:
    """Copy each system's 2k log and corrected structured labels out of a loghub-2.0 git mirror."""
    for system in SYSTEMS:
        blobs = []
        for name in (f"{system}_2k.log", f"{system}_2k.log_structured_corrected.csv"):
            shown = subprocess.run(
                ["git", f"--git-dir={git_dir}", "show", f"HEAD:2k_dataset/{system}/{name}"],
                capture_output=True,
            )
            blobs.append((name, shown.stdout if shown.returncode == 0 else None))
        if any(blob is None for _, blob in blobs):
            print(f"loghub2: {system} is not in this mirror's 2k_dataset, skipped")
            continue
        target = Path(out) / system
        target.mkdir(parents=True, exist_ok=True)
        for name, blob in blobs:
            (target / name).write_bytes(blob or b"")
    for name in ("LICENSE.txt", "CITATION"):
        blob = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"HEAD:2k_dataset/{name}"],
            capture_output=True,
            check=True,
        ).stdout
        (Path(out) / name).write_bytes(blob)


def system_row(root: Path, system: str) -> dict[str, Any]:
    src = root / system
    with open(
        src / f"{system}_2k.log_structured_corrected.csv", encoding="utf-8", errors="replace", newline=""
    ) as fh:
        rows = list(csv.DictReader(fh))
    lines = (src / f"{system}_2k.log").read_text(encoding="utf-8", errors="replace").split("\n")[: len(rows)]
    truth = [row["EventId"] for row in rows]
    raw = {
        "data": {
            "resultType": "streams",
            "result": [
                {
                    "stream": {"job": system},
                    "values": [[str(_T0 + i * 10**6), ln] for i, ln in enumerate(lines)],
                }
            ],
        }
    }
    ours = [p for _, p in line_patterns(raw)]
    return {
        "system": system,
        "lines": len(lines),
        "ga_ours_full": grouping_accuracy(ours, truth),
        "ga_drain3_full": grouping_accuracy(drain3_groups(lines), truth),
        "ga_drain3_content": grouping_accuracy(drain3_groups([r["Content"] for r in rows]), truth),
    }


def run(root: Path) -> list[dict[str, Any]]:
    return [system_row(root, s) for s in SYSTEMS if (root / s).is_dir()]


def main(argv: list[str]) -> int:
    if argv[:1] == ["extract"]:
        extract(argv[1], argv[2])
        return 0
    root = Path(os.environ.get("LOGHUB2_DIR", ".cache/loghub2"))
    if not (root / "Apache").is_dir():
        print(f"loghub2: skipped: no loghub-2.0 data at {root} (see the module docstring to extract it)")
        return 0
    rows = run(root)
    print("| system | ours (full lines) | Drain3 (full lines) | Drain3 (content) |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['system']} | {r['ga_ours_full']:.3f} | {r['ga_drain3_full']:.3f} | {r['ga_drain3_content']:.3f} |"
        )
    for key in ("ga_ours_full", "ga_drain3_full", "ga_drain3_content"):
        values = [r[key] for r in rows]
        print(f"{key}: mean {sum(values) / len(values):.3f}, min {min(values):.3f} ({len(values)} systems)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
