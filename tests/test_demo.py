"""`incident-memory demo` end to end: the seed table, for real, and nothing left running."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from services.runtime.settings import Settings

pytestmark = pytest.mark.slow  # the whole demo, twice: handed out first under -n (tests/xdist_order.py)

CLI = str(Path(sys.executable).with_name("incident-memory"))
SEED_ROLES = (
    [
        "alert",
        "alert",
        "ai",
        "tool",
        "tool",
        "tool",
        "ai",
        "ai",
        "judge",
        "post",
    ]  # the alert, then its recall
    + ["human"] * 5
    + ["ai", "tool", "ai", "ai", "judge", "post"]
)


def _table_rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if re.match(r"^\s+\d+\s+(\d+|-)\s+[a-z]+\s", line)]


def _running(root: Path) -> list[str]:
    """Service processes whose command line names this run's topics (i.e. ones the demo started)."""
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in ps.splitlines() if f"demo.{root.name}." in line]


def test_demo_prints_the_seed_table(stack: Settings, tmp_path: Path) -> None:
    proc = subprocess.run(
        [CLI, "demo", "--cache-dir", str(tmp_path), "--timeout", "90"],
        capture_output=True,
        text=True,
        timeout=400,
        env={
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": stack.kafka_bootstrap_servers,
            "DATABASE_URL": stack.database_url,
        },
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = _table_rows(proc.stdout)
    assert [r[2] for r in rows] == SEED_ROLES
    seqs = [int(r[0]) for r in rows]
    assert seqs == sorted(seqs) and len(seqs) == 21  # after the payments thread's rows (issue 37)
    assert [r[1] for r in rows].count("1") == 8 and [r[1] for r in rows].count("2") == 6
    assert re.search(
        r"^recall: concurrent \S+ https://slack\.com/archives/\S+ \(.*error patterns shared",
        proc.stdout,
        re.M,
    )
    # The first post, as Slack holds it, links the payments thread and says why (issue 37).
    assert re.search(
        r":1:post:0\]  Questions: .*\n\s+\*Concurrent incident\* .*\n"
        r"\s+• <https://slack\.com/archives/\S+\|\S+>: same alertname; \d+ of \d+ error patterns shared",
        proc.stdout,
    ), proc.stdout
    total = re.search(r"total \(21 rows\)\s+([\d,]+)\s+([\d,]+)", proc.stdout)
    assert total, proc.stdout
    raw, ctx = (int(g.replace(",", "")) for g in total.groups())
    assert raw > 40_000
    assert 0 < ctx < 2_500  # the seed post's promise: over 40,000 raw, under 2,500 in context
    calls = re.search(r"^round-2 model input: .*calls: (.*)\)$", proc.stdout, re.M)
    assert calls, proc.stdout
    inputs = [int(tok.replace(",", "")) for tok in re.findall(r"\w+ ([\d,]+)", calls.group(1))]
    assert len(inputs) == 4 and max(inputs) < 2_500  # investigate x2, hypothesis, judge
    assert re.search(r"^model: \S+", proc.stdout, re.M)
    assert "services stopped" in proc.stdout
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert not _running(run_dir)
    # The bot spoke in one Slack thread, rooted at its alert post: the alert, the round-1
    # questions, the round-2 summary, each once, each tagged with its event id.
    spoke = re.search(
        r"^What the bot posted into the Slack thread (\S+)/(\S+), in order.*\n((?:  .*\n?)+)",
        proc.stdout,
        re.M,
    )
    assert spoke, proc.stdout
    posts = [line for line in spoke.group(3).splitlines() if re.match(r"  \d", line)]  # not a post's section
    lines = [line.split() for line in posts]
    assert lines[0][0] == spoke.group(2)  # the thread's root is the alert post
    tags = [line[1].strip("[]") for line in lines]
    assert [t.rsplit(":", 2)[-2:] for t in tags] == [["alert", "0"], ["post", "0"], ["post", "0"]]
    assert [t.split(":")[1] for t in tags] == ["-", "1", "2"] and len(set(tags)) == 3
    assert "Questions:" in spoke.group(3) and "Summary:" in spoke.group(3)


def test_demo_model_switch_drives_the_agent_against_that_endpoint_and_says_so(
    stack: Settings, tmp_path: Path
) -> None:
    """`demo --model X` with OPENAI_BASE_URL at the OpenAI stand-in: every agent call crosses that wire."""
    from deploy.local.openai_standin import MODEL, running

    with running() as oai:
        proc = subprocess.run(
            [CLI, "demo", "--cache-dir", str(tmp_path), "--timeout", "90", "--model", MODEL],
            capture_output=True,
            text=True,
            timeout=400,
            env={
                **os.environ,
                **oai.env(),
                "KAFKA_BOOTSTRAP_SERVERS": stack.kafka_bootstrap_servers,
                "DATABASE_URL": stack.database_url,
            },
        )
        calls = oai.calls()
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # said before it ran, and after: which model, where, and that it is not a real model
    assert re.search(
        rf"models: agent {MODEL}, judge {MODEL}, over the OpenAI wire at {re.escape(oai.base_url)}",
        proc.stdout,
    )
    assert re.search(rf"^model: {MODEL} \(.*NOT a real model\)$", proc.stdout, re.M), proc.stdout
    assert "local-deterministic" not in proc.stdout.split("models: agent")[1]
    assert "playbook: kube-oom made round 1's first tool calls" in proc.stdout
    # the endpoint saw the agent's calls: investigate, and the hypothesis and judge asking for their schema
    assert calls and all(c.status == 200 for c in calls), [(c.status, c.error) for c in calls]
    names = [c.body["response_format"]["json_schema"]["name"] for c in calls if c.body.get("response_format")]
    # the payments alert's round 1 (issue 37's concurrent incident) and checkout's two rounds
    assert names.count("HypothesisAnswer") == 3 and names.count("JudgeAnswer") == 3
    assert (
        sum(1 for c in calls if c.body.get("tools")) == 4
    )  # investigate: each round 1 once (after the playbook), round 2 twice
    rows = _table_rows(proc.stdout)
    assert [r[2] for r in rows] == SEED_ROLES
