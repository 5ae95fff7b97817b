"""`incident-memory bench`: run every benchmark against the real local stack and write BENCHMARKS.md.

Each benchmark module `benchmarks/bench_<name>.py` exposes `run(settings) -> dict` with at least
`title` and `markdown` (and its raw figures). Figures that are compared are ratios measured in the
same run, because these machines are noisy.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.runtime.settings import REPO_ROOT, Settings

ORDER = [
    "compactor_quality",
    "compactor_core",
    "compactor_stream",
    "projector",
    "ingest",
    "e2e",
    "peer",
    "replay",
    "rederive",
    "recall",
    "warroom",
    "review",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only", nargs="*", default=None, help=f"benchmarks to run (default: all of {ORDER})"
    )
    parser.add_argument("--output", default=str(REPO_ROOT / "BENCHMARKS.md"))
    parser.add_argument("--json", default=str(REPO_ROOT / "benchmarks" / "results.json"))
    parser.add_argument("--no-up", action="store_true", help="do not start the local stack (use the env's)")


def run(args: argparse.Namespace) -> int:
    if not args.no_up:
        from deploy.local.stack import up

        up()
    settings = Settings.from_env()
    names = args.only or ORDER
    results: dict[str, Any] = {}
    json_path = Path(args.json)
    if args.only and json_path.exists():  # a partial re-run keeps the other sections from the last run
        results.update({k: v for k, v in json.loads(json_path.read_text()).items() if k in ORDER})
    failed = []
    for name in names:
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        try:
            module = importlib.import_module(f"benchmarks.bench_{name}")
            results[name] = module.run(settings)
            results[name]["measured_at"] = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
        except Exception as exc:
            failed.append(name)
            results[name] = {
                "title": name,
                "markdown": f"**Failed**: `{exc.__class__.__name__}: {exc}`\n",
                "error": traceback.format_exc(),
            }
        print(f"[bench] {name} done in {time.perf_counter() - started:.1f}s", file=sys.stderr, flush=True)
    write_report(Path(args.output), [n for n in ORDER if n in results], results, sys.argv)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(results, indent=2, default=str))
    print(f"wrote {args.output}", file=sys.stderr)
    return 1 if failed else 0


def write_report(path: Path, names: list[str], results: dict[str, Any], argv: list[str]) -> None:
    command = "incident-memory bench" + ("" if len(argv) <= 2 else " " + " ".join(argv[2:]))
    parts = [
        "# Benchmarks\n",
        f"Produced by `{command}` (or `make bench`) on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{platform.machine()}, {_cores()} cores, Python {platform.python_version()}, against the real "
        "local stack (Apache Kafka in KRaft mode and PostgreSQL on loopback). Ratios compare figures "
        "measured in the same run; absolute numbers vary with the machine.\n",
    ]
    for name in names:
        result = results.get(name, {})
        body = result.get("markdown", "(no output)\n").strip("\n")
        heading = f"## {result.get('title', name)}"
        if body.startswith("## "):  # the benchmark wrote its own heading
            heading, _, body = body.partition("\n")
        parts.append(heading + "\n")
        if result.get("measured_at"):
            parts.append(
                f"_Measured {result['measured_at']} by `incident-memory bench --only {name}` or a full run._\n"
            )
        parts.append(body.strip("\n") + "\n")
    path.write_text("\n".join(parts))


def _cores() -> int:
    import os

    return os.cpu_count() or 0
