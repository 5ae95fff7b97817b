"""How many examples the heaviest property tests draw: a share in `make test`, all of them in the deep run.

`make test` must stay within its time budget on CI's two cores, and these tests are pure CPU. The same
properties run with their full counts under INCIDENT_MEMORY_DEEP_PROPERTIES=1, which `make
test-reliability` sets for the modules that use this (Makefile: DEEP_PROPERTY_TESTS).
"""

from __future__ import annotations

import os

DEEP_ENV = "INCIDENT_MEMORY_DEEP_PROPERTIES"


def deep() -> bool:
    return os.environ.get(DEEP_ENV) == "1"


def examples(*, deep_run: int, make_test: int) -> int:
    """`deep_run` examples in the deep run, `make_test` otherwise (never more than the deep count)."""
    return deep_run if deep() else min(make_test, deep_run)
