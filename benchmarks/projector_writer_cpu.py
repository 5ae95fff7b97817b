"""The writer's own CPU for `store.apply_batch` over 22,000 events (1,000 seed-shaped threads, interleaved),
in batches of 20,000 against the real Postgres, counted with `time.process_time` (this process only), so
it compares two trees of the code even on a loaded machine where wall-clock rates are noise.

    python -m benchmarks.projector_writer_cpu [ROOT]   # ROOT: another checkout's tree, to compare with
"""

from __future__ import annotations

import sys
import time


def main(root: str | None) -> None:
    if root:
        sys.path.insert(0, root)
    from deploy.local.pipeline import fresh_schema
    from deploy.local.testdata import interleave, synthetic_thread
    from services.projector import decoding, store
    from services.projector.mapping import map_event
    from services.runtime.settings import Settings

    events = interleave([synthetic_thread(f"17104{k:08d}.000100") for k in range(1000)])
    items = [(k, map_event(e)) for k, e in enumerate(events)]
    render = getattr(decoding, "render_copy_texts", None)  # a tree where decoding renders the COPY text
    for _k, ops in items:
        if render is not None:
            render(ops)
    dsn, batch, cpu = Settings.from_env().database_url, 20_000, 0.0
    with fresh_schema(dsn) as schema:
        conn = store.connect(dsn, schema)
        for start in range(0, len(items), batch):
            with conn.transaction():
                began = time.process_time()
                store.apply_batch(
                    conn, items[start : start + batch], group="b", topic="b", partitions=[0],
                    next_offsets={0: start + batch}, schema=schema,
                )  # fmt: skip
                cpu += time.process_time() - began
        conn.close()
    print(
        f"{store.__file__}: {len(items)} events, writer CPU {cpu:.3f} s, {cpu / len(items) * 1e6:.1f} us/event"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
