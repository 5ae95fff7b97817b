"""What projecting incident profiles costs the projector: the same batches applied with and without them.

`python -m benchmarks.profile_cost` applies 300 synthetic threads (the seed thread's shape) in batches of
2,000 events through `store.apply_batch`, twice each way, into fresh schemas, and prints events/s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg

from deploy.local.pipeline import fresh_schema
from deploy.local.testdata import interleave, synthetic_thread
from services.projector import store
from services.projector.mapping import map_event
from services.runtime.settings import Settings

THREADS = 300
BATCH = 2000


def _apply(dsn: str, items: list[tuple[int, Any]]) -> float:
    with fresh_schema(dsn) as schema, psycopg.connect(dsn, options=f"-c search_path={schema}") as conn:
        started = time.perf_counter()
        for start in range(0, len(items), BATCH):
            chunk = items[start : start + BATCH]
            with conn.transaction():
                store.apply_batch(
                    conn, chunk, group="g", topic="t", partitions=[0],
                    next_offsets={0: start + len(chunk)}, schema=schema,
                )  # fmt: skip
        return time.perf_counter() - started


def main() -> None:
    dsn = Settings.from_env().database_url
    events = interleave([synthetic_thread(f"17105{k:05d}.000100") for k in range(THREADS)])
    items = [(k, map_event(e)) for k, e in enumerate(events)]
    real: Callable[..., None] = store.write_profiles  # type: ignore[attr-defined]
    for _ in range(2):
        for label, writer in (("with profiles", real), ("without profiles", lambda *_a, **_k: None)):
            store.write_profiles = writer  # type: ignore[attr-defined]
            seconds = _apply(dsn, items)
            print(
                f"{label}: {len(events):,} events in {seconds:.2f} s = {len(events) / seconds:,.0f} events/s"
            )
    store.write_profiles = real  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
