"""`incident-memory up` and `incident-memory down`."""

from __future__ import annotations

import argparse
import time

from deploy.local import stack


def add_up_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-migrate", action="store_true", help="do not apply the SQL migrations")
    parser.add_argument("--no-topics", action="store_true", help="do not create the topics")
    parser.add_argument(
        "--check-timeout", type=float, default=10.0, help="seconds to wait for an external broker/db"
    )


def run_up(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    info = stack.up(migrate=not args.no_migrate, topics=not args.no_topics, check_timeout=args.check_timeout)
    print(info.describe())
    timings = " ".join(f"{k}={v}" for k, v in info.timings.items())
    print(f"up in {time.monotonic() - t0:.1f}s {timings}".rstrip())
    return 0


def add_down_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def run_down(args: argparse.Namespace) -> int:
    del args
    stopped = stack.down()
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0
