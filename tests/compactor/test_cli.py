"""`incident-memory compact`: exit 0 with {tool, compact, tokens}; exit 2 with one stderr line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from deploy.local.seed import seed_incident


def _run(args: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli", "compact", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_compacts_the_seed_loki() -> None:
    proc = _run(["--tool", "query_loki"], json.dumps(seed_incident().loki))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"tool", "compact", "tokens"} and out["tool"] == "query_loki"
    assert (
        out["tokens"] <= 300
        and out["compact"]["summary"] == "412 lines, 6 patterns (fatal 198, warn 3, info 211)"
    )


def test_budget_flag() -> None:
    proc = _run(["--tool", "anything", "--budget", "80"], json.dumps({"rows": list(range(500))}))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tokens"] <= 80


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (["--tool", "query_loki"], "{not json"),
        (["--tool", "query_loki"], '{"status": "success"}'),
        (["--tool", "query_prometheus"], '{"data": {"resultType": "vector", "result": []}}'),
        (["--tool", "x", "--budget", "0"], "{}"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], stdin: str) -> None:
    proc = _run(args, stdin)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
