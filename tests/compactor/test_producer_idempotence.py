"""The compactor's faust app produces with acks=all AND idempotence, outside transactions too.

faust 0.15.3 enables aiokafka's idempotence only inside a transaction (exactly_once); the worker's
transport swaps in a producer that always asks for it. Checked on the aiokafka producer faust itself
builds from the app `build_app` wires (no broker needed: nothing is started).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from faust.transport.drivers import aiokafka as faust_aiokafka

from services.compactor.stream_config import StreamConfig
from services.compactor.stream_metrics import StreamMetrics
from services.compactor.stream_selector import load_selector
from services.compactor.worker import build_app
from services.runtime.kafka_client import as_client


async def _aiokafka_producer(faust_producer: Any) -> Any:
    """The AIOKafkaProducer faust would start (its constructor needs a running loop)."""
    producer = faust_producer._new_producer()
    await producer.stop()  # never started: closes it without a broker
    return producer


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_the_apps_producer_is_idempotent_with_acks_all(tmp_path: Path, guarantee: str) -> None:
    config = StreamConfig(as_client("127.0.0.1:1"), workers_dir=tmp_path, processing_guarantee=guarantee)
    app = build_app(config, StreamMetrics(), load_selector("local"))
    producer = asyncio.run(_aiokafka_producer(app.producer))
    assert producer._txn_manager is not None, "idempotence is off"
    assert producer._txn_manager.transactional_id is None  # idempotent, not transactional
    assert producer._sender._acks == -1  # acks=all


def test_fausts_own_producer_is_not_idempotent_outside_a_transaction(tmp_path: Path) -> None:
    """The hole the subclass closes: faust's stock aiokafka producer, on the same app, under at_least_once."""
    config = StreamConfig(as_client("127.0.0.1:1"), workers_dir=tmp_path)
    app = build_app(config, StreamMetrics(), load_selector("local"))
    stock = faust_aiokafka.Producer(app.transport)
    producer = asyncio.run(_aiokafka_producer(stock))
    assert producer._txn_manager is None
