"""`show` with a bad DSN: one line, no traceback, and never the password (issue 32, lesser holes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from services.runtime.checks import pg_error_text


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://orders:S3cr%ZZetPW@127.0.0.1:1/db",  # a password psycopg cannot decode: it quotes it
        "postgresql://orders:S3cretPW@127.0.0.1:1/db%ZZ",
        "host=127.0.0.1 port=1 password=S3cretPW dbname=x sslmode=bogus",
    ],
)
def test_show_with_a_bad_dsn_prints_one_line_without_the_password(dsn: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "show", "1.0", "--dsn", dsn],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "S3cr" not in done.stderr + done.stdout, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "cannot connect to Postgres" in done.stderr


def test_pg_error_text_hides_every_spelling_of_the_password() -> None:
    error = ValueError('invalid percent-encoded token: "p%41ss" (pAss)')
    assert "p%41ss" not in pg_error_text(error, "postgresql://u:p%41ss@h/db")
    assert "pAss" not in pg_error_text(error, "postgresql://u:p%41ss@h/db")
