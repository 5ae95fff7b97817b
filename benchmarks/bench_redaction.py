"""The redactor on real logs: what it changes (false positives, by marker type) and how fast it is.

usage: python -m benchmarks.bench_redaction [LOGHUB_DIR] [--show N]

For each loghub system's Loki result (the corpus of /work/shared/corpus/check_loki_digests.py), every
line goes through `redact_text`: a changed line is listed with its markers, so each can be inspected
(a real secret-like value, or a false positive). Throughput is timed with the line cache bypassed
(`redact_uncached`, every line seen as new), per line and per MB, with the share of lines
the cheap triggers let through to the rules and to detect-secrets' plugins.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import time

from detect_secrets.plugins.keyword import QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP, KeywordDetector

from services.boundary import redact
from services.boundary.redact import MARKER

DEFAULT_DIR = "/work/shared/corpus/loghub"


def _lines(path: str) -> list[str]:
    with gzip.open(path, "rt") as handle:
        raw = json.load(handle)
    return [line for stream in raw["data"]["result"] for _, line, *_ in stream["values"]]


def _false_positives(systems: dict[str, list[str]], show: int) -> None:
    total_lines = total_changed = 0
    kinds: collections.Counter[str] = collections.Counter()
    print("system      lines  changed  markers")
    for name, lines in systems.items():
        changed = [(line, out) for line in lines if (out := redact.redact_text(line)) != line]
        found = collections.Counter(m.group()[10:-1] for _, out in changed for m in MARKER.finditer(out))
        kinds.update(found)
        total_lines += len(lines)
        total_changed += len(changed)
        print(f"{name:<10} {len(lines):>6} {len(changed):>8}  {dict(found) or '-'}")
        for line, out in changed[:show]:
            print(f"    - {line[:160]}\n    + {out[:160]}")
    rate = total_changed / total_lines if total_lines else 0.0
    print(
        f"total      {total_lines:>6} {total_changed:>8}  {dict(kinds) or '-'}  ({rate:.4%} of lines changed)"
    )


def _throughput(systems: dict[str, list[str]]) -> None:
    lines = [line for lines in systems.values() for line in lines]
    size_mb = sum(len(line.encode()) for line in lines) / 1e6
    uncached = redact.redact_uncached
    rules = sum(
        1 for line in lines if redact._has_stem(line) or any(p in line for p in redact._PREFIX_LITERALS)
    )
    plugins = sum(
        1
        for line in lines
        if any(a.holds(line, line.lower()) for _, anchors in redact._PLUGINS for a in anchors)
    )
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for line in lines:
            uncached(line)
        best = min(best, time.perf_counter() - started)
    print(
        f"throughput (uncached, best of 3): {len(lines)} lines, {size_mb:.2f} MB in {best:.3f} s = "
        f"{len(lines) / best:,.0f} lines/s, {size_mb / best:.1f} MB/s, {best / len(lines) * 1e6:.1f} us/line"
    )
    for line in lines:  # warm: a worker's steady state, where log templates repeat across results
        redact.redact_text(line)
    started = time.perf_counter()
    for line in lines:
        redact.redact_text(line)
    cached = time.perf_counter() - started
    print(f"steady (line cache warm): {cached / len(lines) * 1e6:.2f} us/line")
    print(
        f"triggers: {rules / len(lines):.1%} of lines reach the keyword/prefix rules, "
        f"{plugins / len(lines):.1%} reach one of detect-secrets' plugins"
    )
    sample = lines[:300]
    started = time.perf_counter()
    for line in sample:
        for plugin, _ in redact._PLUGINS:
            kwargs = {"denylist_regex_to_group": QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP}
            list(
                plugin.analyze_string(line, **kwargs)
                if isinstance(plugin, KeywordDetector)
                else plugin.analyze_string(line)
            )
    per_line = (time.perf_counter() - started) / len(sample) * 1e6
    print(
        f"for scale: every detect-secrets plugin on every line, no anchors: {per_line:,.0f} us/line ({len(sample)} lines)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", default=DEFAULT_DIR)
    parser.add_argument("--show", type=int, default=5, help="changed lines listed per system")
    args = parser.parse_args()
    systems = {
        os.path.basename(path).split(".")[0]: _lines(path)
        for path in sorted(glob.glob(f"{args.dir}/*.loki.json.gz"))
    }
    _false_positives(systems, args.show)
    _throughput(systems)


if __name__ == "__main__":
    main()
