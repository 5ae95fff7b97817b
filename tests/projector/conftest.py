"""Fixtures of the projector tests: the write plans the store's rules must hold under."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from services.projector import store
from services.projector.plan import Plan

PLAN_CHOICES: dict[str, Sequence[Plan]] = {
    "copy": store.PLANS,  # production: COPY where it applies, in order otherwise
    "in_order": (store.IN_ORDER,),  # the reference: every batch in order
}


@pytest.fixture(params=sorted(PLAN_CHOICES))
def plans(request: pytest.FixtureRequest) -> Sequence[Plan]:
    """The plans `store.apply_batch` may choose from: each rule test runs once per plan."""
    return PLAN_CHOICES[request.param]
