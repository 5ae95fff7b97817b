"""Shared fixtures: ONE real broker and ONE real database per run, isolated per test.

- `stack` (session): runs `deploy.local.stack.up()` once — it starts the local Kafka and
  PostgreSQL or reuses them if already running (file-locked, so parallel pytest runs share
  one stack), applies the migrations to `public` and creates the default topics. With
  INCIDENT_MEMORY_EXTERNAL_STACK=1 it starts nothing and only checks that
  KAFKA_BOOTSTRAP_SERVERS and DATABASE_URL answer. The stack is never stopped at the end of
  the session (other runs may share it); `make down` / `incident-memory down` stops it.
- `pg_schema` / `pg_conn` / `topic_names` (function): a fresh Postgres schema with all
  migrations applied (dropped afterwards), a connection whose search_path is that schema,
  and unique topic names with the production partition counts (deleted afterwards).

The `stack` marker follows from the fixtures: `pytest_collection_modifyitems` marks every test
whose fixture closure reaches `stack` (directly or through `pg_dsn`, `topic_names`, a module's own
fixture...), so `-m "not stack"` (`make test-fast`) can never start Kafka or Postgres. A
hand-placed `@pytest.mark.stack` is only needed by a test that reaches the stack some other way.

Parallel runs (`pytest -n N`, pytest-xdist; `make test`): every worker reuses the same stack (`up` is
file-locked and idempotent) and isolates as above. A test marked `serial` restarts a process the
others share or asserts a wall-clock bound that parallel load would break; under a worker it is
skipped with that reason, and `make test` runs the serial ones alone after the parallel pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg
import pytest
from serial_pass import (  # tests/ is on sys.path (this rootdir conftest's dir)
    refuse_hidden_serial_marks,
    skip_serial_in_workers,
)
from xdist_order import heavy_modules_first

from deploy.local.external import external_stack
from deploy.local.pipeline import fresh_schema, fresh_topics
from services.runtime.settings import Settings

STACK_FIXTURE = "stack"


def pytest_configure(config: pytest.Config) -> None:
    """The recorded telemetry back end has no default in production: the tests serve the seed's."""
    import os

    from deploy.local.seed import use_seed_recording

    use_seed_recording(os.environ)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `stack` every test that uses the stack fixture, however indirectly; under an xdist worker,
    skip every `serial` test (it would share the machine with the other workers' tests); put the heavy
    modules first (tests/xdist_order.py)."""
    for item in items:
        if STACK_FIXTURE in getattr(item, "fixturenames", ()) and item.get_closest_marker("stack") is None:
            item.add_marker(pytest.mark.stack)
    refuse_hidden_serial_marks(items)
    skip_serial_in_workers(config, items)
    heavy_modules_first(items)


@pytest.fixture(scope="session")
def stack() -> Settings:
    """The real Kafka + Postgres of this run (see the module docstring)."""
    from services.runtime.errors import UserFacingError

    try:
        if external_stack():
            from services.runtime.checks import check_kafka, check_postgres

            settings = Settings.from_env()
            check_kafka(settings.kafka_bootstrap_servers, timeout=15)
            check_postgres(settings.database_url, timeout=15)
            return settings
        from deploy.local.stack import up

        return up().settings
    except UserFacingError as exc:  # a clear failure, not a skip: these tests claim real behaviour
        pytest.fail(f"the real stack is not available: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def kafka_bootstrap(stack: Settings) -> str:
    return stack.kafka_bootstrap_servers


@pytest.fixture(scope="session")
def pg_dsn(stack: Settings) -> str:
    return stack.database_url


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """Per-test schema: `deploy.local.pipeline.fresh_schema` (a module-scoped fixture may use it directly)."""
    with fresh_schema(pg_dsn) as name:
        yield name


@pytest.fixture
def pg_conn(pg_dsn: str, pg_schema: str) -> Iterator[psycopg.Connection]:
    """autocommit=False, search_path = pg_schema (set at connect, so it survives every transaction)."""
    conn = psycopg.connect(pg_dsn, autocommit=False, options=f"-c search_path={pg_schema}")
    try:
        yield conn
    finally:
        with contextlib.suppress(psycopg.Error):
            conn.rollback()
        conn.close()


@pytest.fixture
def topic_names(kafka_bootstrap: str) -> Iterator[dict[str, str]]:
    """Per-test topics: `deploy.local.pipeline.fresh_topics` (a module-scoped fixture may use it directly)."""
    with fresh_topics(kafka_bootstrap) as names:
        yield names
