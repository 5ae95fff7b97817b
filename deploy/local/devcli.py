"""`incident-memory` in the development install: every production subcommand (services/cli.py) plus
the development ones, which need the dev tree (`deploy/`, `benchmarks/`) that the image does not ship.

Imported normally (plain import statements in the loaders), so import-linter sees that only this
dev tool reaches `deploy.local.*` and `benchmarks.run`. `python -m deploy.local.devcli` works too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from types import ModuleType

from services.cli import SUBCOMMANDS, Command, run_cli


def _stack() -> ModuleType:
    from deploy.local import stack_cli

    return stack_cli


def _demo() -> ModuleType:
    from deploy.local import demo

    return demo


def _bench() -> ModuleType:
    from benchmarks import run

    return run


DEV_SUBCOMMANDS: dict[str, Command] = {
    "up": Command(_stack, "start the local stack (Kafka in KRaft mode, PostgreSQL)"),
    "down": Command(_stack, "stop what `up` started"),
    "demo": Command(_demo, "run the seed incident end to end and print its table"),
    "bench": Command(_bench, "run the benchmarks and write BENCHMARKS.md"),
}
COMMANDS: dict[str, Command] = {**DEV_SUBCOMMANDS, **SUBCOMMANDS}


def main(argv: Sequence[str] | None = None) -> int:
    from deploy.local.seed import use_seed_recording

    use_seed_recording(os.environ)  # what the services it starts serve from their recorded back end
    return run_cli(COMMANDS, argv, description=(__doc__ or "").splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
