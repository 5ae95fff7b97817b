"""The external-stack mode of the tests, and the one skip for the tests it cannot serve.

With INCIDENT_MEMORY_EXTERNAL_STACK=1 the tests' `stack` fixture (tests/conftest.py) starts nothing:
it checks and uses KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL, someone else's Kafka and PostgreSQL. A
test that needs the local stack's own processes (restart its PostgreSQL, `up --secure` it, find the
pids `up` started) has nothing to act on there: it carries `local_stack_only(why)` and is skipped
with that reason. Tests that start brokers of their own, on their own ports, are not among them.

A test module imports this (never `conftest`): `from deploy.local.external import local_stack_only`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

ENV = "INCIDENT_MEMORY_EXTERNAL_STACK"


def external_stack() -> bool:
    """True when the tests run on an external Kafka + PostgreSQL (INCIDENT_MEMORY_EXTERNAL_STACK=1)."""
    return os.environ.get(ENV) == "1"


def local_stack_only(why: str) -> pytest.MarkDecorator:
    """Skip under the external-stack mode, saying so and `why` the test needs the local stack.

    E.g. `@local_stack_only("restarts the local PostgreSQL with pg_ctl")` (or as a module's `pytestmark`)."""
    import pytest  # a dev dependency: only tests call this

    return pytest.mark.skipif(
        external_stack(),
        reason=f"{ENV}=1 (KAFKA_BOOTSTRAP_SERVERS / DATABASE_URL, nothing started locally); this test {why}",
    )
