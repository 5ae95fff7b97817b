"""`incident-memory up --secure` for the local PostgreSQL: TLS from the local CA, checked for real.

verify-full connects and the session is encrypted; a client trusting another CA, or asking for a
host name the certificate does not carry, is refused in one line; a second `up --secure` restarts
nothing (same postmaster, same certificate) and the least-privilege roles of migration 004 work as
before, over TLS.
"""

from __future__ import annotations

import argparse
import os
import pwd
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql

from deploy.local import stack_cli, tls
from deploy.local.external import local_stack_only
from deploy.local.stack import StackInfo
from services.runtime import settings as rt
from services.runtime.checks import check_postgres
from services.runtime.errors import UserFacingError
from services.runtime.settings import Settings

local_stack = local_stack_only("secures the local stack's PostgreSQL (`up --secure`)")
SSL_QUERY = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


@pytest.fixture(scope="module")
def secured(stack: Settings) -> StackInfo:
    from deploy.local.stack import up

    return up(migrate=False, topics=False, secure=True)


def _url(ca: Path, *, user: str, password: str, host: str = "127.0.0.1", extra: str = "") -> str:
    return (
        f"postgresql://{user}:{password}@{host}:{rt.LOCAL_PG_PORT}/{rt.LOCAL_PG_DB}"
        f"?sslmode=verify-full&sslrootcert={quote(str(ca), safe='/')}{extra}"
    )


def _one_line_refusal(dsn: str, password: str) -> str:
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=5).close()
    with pytest.raises(UserFacingError) as caught:
        check_postgres(dsn, timeout=5)
    message = str(caught.value)
    assert len(message.splitlines()) == 1, message
    assert "DATABASE_URL=" in message and ":***@" in message, message
    assert password not in message, message
    return message


@local_stack
def test_verify_full_connects_and_the_session_is_encrypted(secured: StackInfo) -> None:
    assert secured.ca_file == secured.state_dir / "tls" / "ca.pem"
    dsn = secured.verify_full_dsn
    assert dsn is not None and "sslmode=verify-full" in dsn and f"sslrootcert={secured.ca_file}" in dsn
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        assert conn.execute(SSL_QUERY).fetchone() == (True,)
        assert conn.execute("SHOW ssl").fetchone() == ("on",)
    check_postgres(dsn, timeout=5)
    described = secured.describe()
    assert "sslmode=verify-full" in described and f"sslrootcert={secured.ca_file}" in described
    assert "incident_memory:***@127.0.0.1" in described  # the password stays redacted


@local_stack
def test_a_client_trusting_another_ca_is_refused_in_one_line(secured: StackInfo, tmp_path: Path) -> None:
    other = tls.ensure_ca(tmp_path)  # same CA name, another key: only the signature tells them apart
    password = f"s3cret-{uuid.uuid4().hex}"
    message = _one_line_refusal(_url(other.cert, user=rt.LOCAL_PG_USER, password=password), password)
    assert "certificate verify failed" in message


@local_stack
def test_a_host_name_the_certificate_does_not_carry_is_refused(secured: StackInfo) -> None:
    assert secured.ca_file is not None
    password = f"s3cret-{uuid.uuid4().hex}"
    # hostaddr connects to the server; host is the name verify-full checks against the certificate
    wrong = _url(secured.ca_file, user=rt.LOCAL_PG_USER, password=password, host="db.not-in-the-cert.test",
                 extra="&hostaddr=127.0.0.1")  # fmt: skip
    message = _one_line_refusal(wrong, password)
    assert 'does not match host name "db.not-in-the-cert.test"' in message
    # the same route with a name the certificate carries: the refusal above was about the name only
    right = _url(secured.ca_file, user=rt.LOCAL_PG_USER, password=rt.LOCAL_PG_PASSWORD, host="localhost",
                 extra="&hostaddr=127.0.0.1")  # fmt: skip
    with psycopg.connect(right, connect_timeout=5) as conn:
        assert conn.execute(SSL_QUERY).fetchone() == (True,)


@local_stack
def test_a_second_secure_up_reloads_nothing_away(secured: StackInfo) -> None:
    from deploy.local import postgres_node
    from deploy.local.stack import up

    server = postgres_node.paths(secured.state_dir).root / "tls"
    before = {p.name: p.read_bytes() for p in server.iterdir()}
    again = up(migrate=False, topics=False, secure=True)
    assert again.postgres_pid == secured.postgres_pid is not None  # reloaded at most, never restarted
    assert again.ca_file == secured.ca_file and again.verify_full_dsn == secured.verify_full_dsn
    assert {p.name: p.read_bytes() for p in server.iterdir()} == before  # the certificate is reused
    key = server / "server.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600  # PostgreSQL refuses a key others can read
    if os.geteuid() == 0:  # the cluster runs as the postgres OS user, which must own its key
        assert pwd.getpwuid(key.stat().st_uid).pw_name == postgres_node.OS_USER
    assert again.verify_full_dsn is not None
    with psycopg.connect(again.verify_full_dsn, connect_timeout=5) as conn:
        assert conn.execute(SSL_QUERY).fetchone() == (True,)


@pytest.fixture
def least_privilege_logins(secured: StackInfo) -> Iterator[dict[str, tuple[str, str]]]:
    """One login role in each group role of migration 004: {group: (role, password)}."""
    logins = {group: (f"im_tls_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex)
              for group in ("incident_memory_reader", "incident_memory_projector")}  # fmt: skip
    with psycopg.connect(secured.database_url, autocommit=True) as conn:
        for group, (role, password) in logins.items():
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {}").format(
                sql.Identifier(role), sql.Literal(password), sql.Identifier(group)))  # fmt: skip
    yield logins
    with psycopg.connect(secured.database_url, autocommit=True) as conn:
        for role, _ in logins.values():
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@local_stack
def test_least_privilege_roles_are_unaffected_over_tls(
    secured: StackInfo, least_privilege_logins: dict[str, tuple[str, str]]
) -> None:
    assert secured.ca_file is not None
    reader, reader_pw = least_privilege_logins["incident_memory_reader"]
    with psycopg.connect(_url(secured.ca_file, user=reader, password=reader_pw), autocommit=True) as conn:
        assert conn.execute(SSL_QUERY).fetchone() == (True,)
        conn.execute("SELECT count(*) FROM agent_messages").fetchone()
        for write in (
            "DELETE FROM agent_messages WHERE false",
            "UPDATE slack_posts SET channel = channel WHERE false",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(write)
    projector, projector_pw = least_privilege_logins["incident_memory_projector"]
    with psycopg.connect(
        _url(secured.ca_file, user=projector, password=projector_pw), autocommit=True
    ) as conn:
        assert conn.execute(SSL_QUERY).fetchone() == (True,)
        conn.execute("DELETE FROM agent_messages WHERE false")  # may write (nothing matches)
        conn.execute("UPDATE projector_offsets SET next_offset = next_offset WHERE false")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TABLE im_tls_not_allowed (x int)")


def test_the_secure_flag_reaches_stack_up(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    stack_cli.add_up_arguments(parser)
    assert parser.parse_args([]).secure is False
    seen: dict[str, object] = {}
    ca = Path("/state/tls/ca.pem")

    def fake_up(**kwargs: object) -> StackInfo:
        seen.update(kwargs)
        return StackInfo("127.0.0.1:1", "postgresql://u:pw@127.0.0.1:25432/db", 1, 2, ca_file=ca)

    monkeypatch.setattr("deploy.local.stack.up", fake_up)  # what stack_cli calls
    assert stack_cli.run_up(parser.parse_args(["--secure", "--no-topics"])) == 0
    assert seen["secure"] is True
    out = capsys.readouterr().out
    assert (
        "sslmode=verify-full&sslrootcert=/state/tls/ca.pem" in out and "u:***@" in out and ":pw@" not in out
    )
