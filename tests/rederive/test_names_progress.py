"""Names, progress arithmetic, and the command's one-line errors (no stack needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from services.rederive.names import check_name, names_for
from services.rederive.progress import Eta, format_eta, progress_line, remaining
from services.runtime.errors import BadInput

CLI = str(Path(sys.executable).parent / "incident-memory")


def test_every_resource_is_named_after_the_name() -> None:
    n = names_for("v6_budgets")
    assert (n.schema, n.compacted_topic, n.dlq_topic) == (
        "v6_budgets",
        "incident.compacted.v6_budgets",
        "incident.dlq.v6_budgets",
    )
    assert n.app_id == "incident-memory-compactor-rederive-v6_budgets"
    assert n.projector_group == "incident-memory-projector-rederive-v6_budgets"


@pytest.mark.parametrize("bad", ["", "V6", "6v", "a-b", "a b", "a" * 41, "public", "live", "pg_x", 'x";drop'])
def test_bad_names_are_refused(bad: str) -> None:
    with pytest.raises(BadInput):
        check_name(bad)


def test_remaining_and_eta() -> None:
    assert remaining({0: 10, 1: 5, 2: 0}, {0: 4, 1: 7}) == 6
    eta = Eta(window=10)
    eta.add(0.0, 0)
    eta.add(2.0, 200)
    assert eta.rate() == 100
    assert eta.seconds_left(500) == 5
    assert format_eta(5) == "ETA 0m05s" and format_eta(None) == "ETA ?" and format_eta(3700) == "ETA 1h01m"
    assert progress_line("compactor", 200, 700, eta) == "compactor 200/700 (29%) 100/s ETA 0m05s"


@pytest.mark.parametrize(
    "argv, words",
    [
        (["rederive", "--into", "Bad-Name"], "is not a valid name"),
        (["rederive", "--into", "live"], "is reserved"),
        (["rederive", "--switch", "no such"], "is not a valid name"),
        (["rederive", "--into", "ok", "--workers", "0"], "--workers must be at least 1"),
        (["rederive", "--switch", "v7", "--worker"], "--worker goes with --into NAME"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], words: str) -> None:
    done = subprocess.run([CLI, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], done.stderr


def test_the_default_selection_changelog_is_the_live_compactors() -> None:
    """Shared with the live compactor, so that a re-derivation finds the recorded choices."""
    import argparse

    from schemas import topics
    from services.compactor import app as compactor_cli
    from services.compactor.stream_config import StreamConfig
    from services.rederive import main as rederive_cli
    from services.runtime.kafka_client import KafkaClient

    defaults = []
    for cli in (compactor_cli, rederive_cli):
        parser = argparse.ArgumentParser()
        cli.add_arguments(parser)
        defaults.append(parser.get_default("selections_topic"))
    assert defaults == [topics.SELECTIONS, topics.SELECTIONS]
    assert StreamConfig(kafka=KafkaClient.plaintext("unused:9092")).selections_topic == topics.SELECTIONS
