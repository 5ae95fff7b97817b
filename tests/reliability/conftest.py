"""Reliability fixtures: a Pipeline per test, and a results log that RELIABILITY.md is filled from."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.runtime.settings import Settings

from .harness import Pipeline

RESULTS = Path(__file__).with_name("results.jsonl")
NOTES: dict[str, dict[str, object]] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fast: reliability test also run by `make test`")


@pytest.fixture
def pipeline(
    stack: Settings, pg_schema: str, topic_names: dict[str, str], tmp_path: Path
) -> Iterator[Pipeline]:
    pipe = Pipeline(stack.kafka_bootstrap_servers, stack.database_url, pg_schema, topic_names, tmp_path)
    try:
        yield pipe
    finally:
        pipe.stop_all()


@pytest.fixture
def record(request: pytest.FixtureRequest) -> dict[str, object]:
    """Figures a test wants in the results log (events/s, counts...)."""
    return NOTES.setdefault(request.node.nodeid, {})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    outcome: Any = yield
    report = outcome.get_result()
    if report.when == "call" or (report.when == "setup" and report.failed):
        line = {"test": item.nodeid, "outcome": report.outcome, "seconds": round(report.duration, 1),
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **NOTES.get(item.nodeid, {})}  # fmt: skip
        if report.failed:
            line["error"] = str(report.longrepr).splitlines()[-1][:300] if report.longrepr else ""
        with RESULTS.open("a") as out:
            out.write(json.dumps(line, default=str) + "\n")
