"""`NoLossConsumer.getmany`: the first record of a partition after a seek must be the one sought.

The real-broker test (test_two_worker_duplicates.py) hits the race about once in 15 rebalances;
this one drives the guard directly, with faust's getmany and seek replaced by fakes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import faust
import pytest
from faust.transport.consumer import Consumer as FaustConsumer
from faust.types import TP

from services.compactor.faust_patch import NoLossConsumer

P5 = TP("incident.events", 5)
P6 = TP("incident.events", 6)


@dataclass
class Record:
    offset: int


def consumer_with(batches: list[list[tuple[TP, Record]]], resume_at: dict[TP, int]) -> Any:
    consumer: Any = object.__new__(NoLossConsumer)  # no app, no broker: only the guard runs
    consumer._resume_at = dict(resume_at)
    consumer.sought = []

    async def seek(tp: TP, offset: int) -> None:
        consumer.sought.append((tp, offset))

    consumer.seek = seek
    consumer.batches = list(batches)
    return consumer


async def drain(consumer: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    async def fake_getmany(self: Any, timeout: float) -> AsyncIterator[tuple[TP, Record]]:
        for item in self.batches.pop(0):
            yield item

    monkeypatch.setattr(FaustConsumer, "getmany", fake_getmany)
    out = []
    while consumer.batches:
        async for tp, record in consumer.getmany(1.0):
            out.append((tp.partition, record.offset))
    return out


def test_records_past_the_seek_are_dropped_and_the_partition_sought_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stale = [(P5, Record(123)), (P6, Record(93)), (P5, Record(124)), (P6, Record(94))]
    again = [(P5, Record(93)), (P5, Record(94))]
    consumer = consumer_with([stale, again], {P5: 93, P6: 93})
    out = asyncio.run(drain(consumer, monkeypatch))
    assert consumer.sought == [(P5, 93)]
    assert out == [(6, 93), (6, 94), (5, 93), (5, 94)]  # p6 untouched; p5 read again from 93


def test_only_the_first_record_after_a_seek_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A later gap (a transaction marker) is real: it is never sought back over."""
    consumer = consumer_with([[(P5, Record(93)), (P5, Record(95))], [(P5, Record(97))]], {P5: 93})
    out = asyncio.run(drain(consumer, monkeypatch))
    assert consumer.sought == []
    assert out == [(5, 93), (5, 95), (5, 97)]


def test_a_partition_with_nothing_committed_is_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    consumer = consumer_with([[(P5, Record(40))]], {})
    assert asyncio.run(drain(consumer, monkeypatch)) == [(5, 40)]
    assert consumer.sought == []


def test_the_patch_refuses_a_faust_it_was_not_written_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """The patch reads faust's internals: under another faust-streaming version, importing it is one
    clear error. (A fresh copy of the module is executed, so the loaded one stays as it is.)"""
    import importlib.util

    from services.compactor import faust_patch
    from services.runtime.errors import UserFacingError

    assert faust.__version__ == faust_patch.FAUST_VERSION  # the pinned one is installed
    monkeypatch.setattr(faust, "__version__", "0.99.0")
    spec = importlib.util.spec_from_file_location("faust_patch_copy", faust_patch.__file__)
    assert spec is not None and spec.loader is not None
    with pytest.raises(UserFacingError, match=r"faust-streaming 0\.99\.0 is installed.*written for 0\.15\.3"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
