"""Issue 35's "Done when": every compact of the seed, the corpus and the benchmarks' inputs is
byte-identical to the goldens generated from the code before the restructuring."""

from __future__ import annotations

import json

from .golden_cases import GOLDEN, cases, digest


def test_every_compact_is_byte_identical_to_its_golden() -> None:
    golden = json.loads(GOLDEN.read_text())
    seen = []
    changed = []
    for name, tool, raw, ctx, budget in cases():
        seen.append(name)
        if digest(tool, raw, ctx, budget) != golden.get(name):
            changed.append(name)
    assert sorted(seen) == sorted(golden), "the cases and the goldens name different inputs"
    assert not changed, f"compacts changed: {changed}"
