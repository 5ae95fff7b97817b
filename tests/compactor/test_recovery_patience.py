"""`PatientRecovery._wait`: a recovery step slower than `broker_request_timeout` delays the worker, never
stops it for good (faust_patch hole 4).

Found in CI (tests/test_kafka_secure.py): a compactor's first seek to its committed offsets outlived the
timeout, faust's recovery task ended on a debug line, and the worker, alive and in its group, compacted
nothing for three minutes. The waits are driven here on faust's own Recovery service, with a step that
sleeps past a short timeout; no broker is needed (nothing is started but the recovery's waits).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import faust
import pytest
from faust.tables.recovery import RebalanceAgain, Recovery, ServiceStopped

from services.compactor.faust_patch import PatientRecovery, PatientTableManager
from services.compactor.stream_config import StreamConfig
from services.compactor.stream_metrics import StreamMetrics
from services.compactor.stream_selector import load_selector
from services.compactor.worker import build_app
from services.runtime.kafka_client import as_client

TIMEOUT = 0.05  # the recovery's per-step deadline here (faust's broker_request_timeout, 90 s by default)


def _recovery(patient: bool) -> Any:
    app = faust.App("recovery-patience", autodiscover=False, TableManager=PatientTableManager)
    tables: Any = app.tables
    return tables.recovery if patient else Recovery(app, tables)


async def _slow_step(seconds: float, done: list[str]) -> str:
    await asyncio.sleep(seconds)
    done.append("sought")
    return "sought"


def test_a_step_slower_than_the_timeout_is_awaited_to_its_end_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[str] = []

    async def run() -> None:
        await _recovery(patient=True)._wait(_slow_step(4 * TIMEOUT, done), timeout=TIMEOUT)

    with caplog.at_level(logging.WARNING, logger="incident_memory.compactor"):
        asyncio.run(run())
    assert done == ["sought"]
    waits = [r for r in caplog.records if "still waiting for the broker" in r.getMessage()]
    assert len(waits) >= 2, [r.getMessage() for r in caplog.records]


def test_faust_alone_ends_the_recovery_on_the_same_slow_step() -> None:
    """The hole itself: without the patch the slow step is cancelled and reported as a stop, which ends
    faust's recovery loop (`except ServiceStopped: break`). If a faust upgrade changes this, re-read hole 4."""
    done: list[str] = []

    async def run() -> None:
        await _recovery(patient=False)._wait(_slow_step(4 * TIMEOUT, done), timeout=TIMEOUT)

    with pytest.raises(ServiceStopped):
        asyncio.run(run())
    assert done == []


@pytest.mark.parametrize(
    ("event", "ends_with"),
    [("signal_recovery_start", RebalanceAgain), ("_stopped", ServiceStopped)],
    ids=["a new rebalance", "a stop"],
)
def test_a_new_rebalance_or_a_stop_still_ends_the_wait_and_cancels_the_step(
    event: str, ends_with: type[Exception]
) -> None:
    done: list[str] = []

    async def run() -> None:
        recovery = _recovery(patient=True)
        asyncio.get_running_loop().call_later(3 * TIMEOUT, getattr(recovery, event).set)
        await recovery._wait(_slow_step(10 * TIMEOUT, done), timeout=TIMEOUT)

    with pytest.raises(ends_with):
        asyncio.run(run())
    assert done == []


def test_a_steps_own_error_is_raised() -> None:
    async def failing() -> None:
        await asyncio.sleep(2 * TIMEOUT)
        raise ValueError("the coordinator refused")

    async def run() -> None:
        await _recovery(patient=True)._wait(failing(), timeout=TIMEOUT)

    with pytest.raises(ValueError, match="the coordinator refused"):
        asyncio.run(run())


def test_the_compactor_app_recovers_with_the_patient_recovery(tmp_path: Path) -> None:
    config = StreamConfig(as_client("127.0.0.1:1"), workers_dir=tmp_path)
    app = build_app(config, StreamMetrics(), load_selector("local"))
    tables: Any = app.tables
    assert isinstance(tables.recovery, PatientRecovery)
