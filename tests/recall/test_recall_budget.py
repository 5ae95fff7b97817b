"""Recall's by-signature stage reads within one budget of index rows, rarest keys first (schemas/recall_budget.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemas.recall import PICKING_KEYS
from schemas.recall_budget import KEY_FLOOR, PER_KEY, SIGNATURE_ROWS, key_limits, rows_read


def test_common_keys_are_capped_where_each_would_read_its_full_share() -> None:
    keys = [f"k{i}" for i in range(2 * PICKING_KEYS)]
    holders = dict.fromkeys(keys, 50_000)  # at 100,000 incidents a common key has tens of thousands
    limits = key_limits(keys, holders)
    assert rows_read(limits, keys, holders) <= SIGNATURE_ROWS < PER_KEY * len(keys)
    assert limits[0] == PER_KEY  # the most telling key reads its newest holders in full
    assert limits[-1] == KEY_FLOOR  # a common key still picks a few: an incident without logs has no other


def test_a_rare_key_leaves_the_rows_it_cannot_use_to_the_next() -> None:
    keys = ["rare", "also rare", *(f"common {i}" for i in range(5))]
    holders = {"rare": 3, "also rare": 40, **dict.fromkeys(keys[2:], 60_000)}
    limits = key_limits(keys, holders, budget=800, per_key=200, floor=10)
    assert limits == [200, 200, 200, 200, 200, 800 - 3 - 40 - 3 * 200 - 10, 10]
    assert rows_read(limits, keys, holders) == 800


def test_a_key_nobody_holds_reads_nothing_and_costs_nothing() -> None:
    limits = key_limits(["new", "b"], {"b": 10_000}, budget=250, per_key=200, floor=10)
    assert limits == [200, 200] and rows_read(limits, ["new", "b"], {"b": 10_000}) == 200


def test_a_budget_below_the_floors_is_refused() -> None:
    with pytest.raises(ValueError, match="floor"):
        key_limits(["a", "b", "c"], {}, budget=20, floor=10)


@given(
    st.lists(st.integers(min_value=0, max_value=200_000), max_size=2 * PICKING_KEYS),
    st.integers(min_value=2 * PICKING_KEYS * KEY_FLOOR, max_value=5_000),
)
def test_the_rows_read_never_pass_the_budget_and_every_key_reads_its_floor(
    counts: list[int], budget: int
) -> None:
    keys = [f"k{i}" for i in range(len(counts))]
    holders = dict(zip(keys, counts, strict=True))
    limits = key_limits(keys, holders, budget=budget)
    assert rows_read(limits, keys, holders) <= budget
    assert all(KEY_FLOOR <= limit <= PER_KEY for limit in limits)
