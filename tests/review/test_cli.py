"""`incident-memory review` refuses, in one line, what it must not serve: a login that could write, a bad
schema name, a channel allow-list that is not Slack ids."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT


def _review(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "services.cli", "review", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_an_owner_login_is_a_one_line_error_not_a_page(pg_dsn: str, pg_schema: str) -> None:
    done = _review("--dsn", pg_dsn, "--schema", pg_schema, "--port", "0")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("incident-memory review: the review page runs only as a read-only role")
    assert len(done.stderr.strip().splitlines()) == 1


def test_bad_arguments_exit_2_with_one_line() -> None:
    for args, words in (
        (("--schema", "x; drop"), "--schema"),
        (("--channels", "C01,javascript:1"), "--channels"),
    ):
        done = _review(*args)
        assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
