"""`incident-memory up` and `incident-memory down`."""

from __future__ import annotations

import argparse
import time

from deploy.local import stack
from services.runtime.settings import LOCAL_CLUSTER_PORTS, LOCAL_SECURE_KAFKA_PORT


def add_up_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-migrate", action="store_true", help="do not apply the SQL migrations")
    parser.add_argument("--no-topics", action="store_true", help="do not create the topics")
    parser.add_argument(
        "--check-timeout", type=float, default=10.0, help="seconds to wait for an external broker/db"
    )
    parser.add_argument(
        "--brokers",
        type=int,
        choices=(1, 3),
        default=1,
        help="1: the single local broker; 3: a three-node KRaft cluster on ports "
        + ",".join(str(port) for port, _ in LOCAL_CLUSTER_PORTS)
        + " (topics replicated 3 times, min.insync.replicas=2)",
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help="TLS from a local CA (<state>/tls/ca.pem): the local PostgreSQL gets ssl=on (verify-full DSN "
        "printed), and a second Kafka node serves SASL_SSL on "
        f"{LOCAL_SECURE_KAFKA_PORT} with SCRAM users and per-service ACLs",
    )


def run_up(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    info = stack.up(
        migrate=not args.no_migrate,
        topics=not args.no_topics,
        check_timeout=args.check_timeout,
        brokers=args.brokers,
        secure=args.secure,
    )
    print(info.describe())
    if len(info.kafka_pids) > 1:
        print(f"services use it with: export KAFKA_BOOTSTRAP_SERVERS={info.kafka_bootstrap_servers}")
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
