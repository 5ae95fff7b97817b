"""bench_e2e's listener stamps each row with the first notice that covers it, not an earlier one."""

from __future__ import annotations

from benchmarks.bench_e2e import stamps


def test_a_row_is_stamped_by_the_first_notice_that_covers_its_seq() -> None:
    covers = {"t1": [(3, 10.0), (5, 11.0)], "t2": [(1, 12.0)]}
    rows = [("t1", "a", 2), ("t1", "b", 3), ("t1", "c", 4), ("t1", "d", 5), ("t2", "e", 1)]
    assert stamps(covers, rows) == {"a": 10.0, "b": 10.0, "c": 11.0, "d": 11.0, "e": 12.0}


def test_a_row_committed_after_a_notice_is_not_stamped_by_it() -> None:
    # The first notice of t1 covered seq 3; seq 4 came in a later transaction with its own notice.
    assert stamps({"t1": [(3, 10.0), (4, 10.5)]}, [("t1", "late", 4)]) == {"late": 10.5}
