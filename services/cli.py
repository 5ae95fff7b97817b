"""`incident-memory-service`: the production entry point, the image's ENTRYPOINT (DESIGN.md, "Command line").

Each subcommand lives in the module that owns it, which exposes `add_arguments(parser)` and
`run(args) -> int`. A subcommand's module is imported by its loader, with a plain import statement
(so import-linter sees every dependency), and only when that subcommand runs, so `compact` does not
pay for LangGraph. The development commands (`up`, `down`, `demo`, `bench`) are not here: they are
in `deploy/local/devcli.py`, the dev install's `incident-memory`, which the image does not ship.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import NamedTuple

from services.runtime.errors import UserFacingError


class Command(NamedTuple):
    """A subcommand: its module's loader (a function holding a plain import) and its help line."""

    load: Callable[[], ModuleType]
    help: str


def _migrate() -> ModuleType:
    from services import migrate_cli

    return migrate_cli


def _ingest() -> ModuleType:
    from services.ingest import main

    return main


def _compactor() -> ModuleType:
    from services.compactor import app

    return app


def _projector() -> ModuleType:
    from services.projector import main

    return main


def _agent() -> ModuleType:
    from services.agent import main

    return main


def _slack() -> ModuleType:
    from services.voice import main

    return main


def _telemetry_mcp() -> ModuleType:
    from services.telemetry_mcp import server

    return server


def _replay() -> ModuleType:
    from services.projector import replay

    return replay


def _rederive() -> ModuleType:
    from services.rederive import main

    return main


def _show() -> ModuleType:
    from services.projector import show

    return show


def _recall() -> ModuleType:
    from services.projector import recall_cli

    return recall_cli


def _threads() -> ModuleType:
    from services.projector import show_threads

    return show_threads


def _review() -> ModuleType:
    from services.review import main

    return main


def _compact() -> ModuleType:
    from services.compactor import cli

    return cli


SUBCOMMANDS: dict[str, Command] = {
    "migrate": Command(_migrate, "apply the SQL migrations and create the topics"),
    "ingest": Command(_ingest, "run the ingest HTTP service (Slack, Alertmanager)"),
    "compactor": Command(_compactor, "run a compactor worker (faust-streaming)"),
    "projector": Command(_projector, "run the projector (Kafka -> Postgres)"),
    "agent": Command(_agent, "run the agent (wake consumer, LangGraph)"),
    "slack": Command(_slack, "run the Slack poster (the agent's voice, exactly once)"),
    "telemetry-mcp": Command(_telemetry_mcp, "run the telemetry MCP server"),
    "replay": Command(_replay, "re-derive the projection from the topics"),
    "rederive": Command(_rederive, "re-derive through a new compactor, blue/green, with a diff"),
    "show": Command(_show, "print a thread's row-by-row table"),
    "recall": Command(_recall, "similar and concurrent incidents, with their reasons"),
    "threads": Command(_threads, "list threads with status, rounds and tokens"),
    "review": Command(_review, "serve the read-only review page (raw beside compact, per row)"),
    "compact": Command(_compact, "compact one raw tool result read from stdin"),
}


def build_parser(
    commands: Mapping[str, Command] = SUBCOMMANDS, prog: str = "incident-memory", description: str = ""
) -> argparse.ArgumentParser:
    """Every subcommand listed; only the one named on the command line is imported and given its arguments."""
    parser = argparse.ArgumentParser(prog=prog, description=description or (__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in commands.items():
        if name in sys.argv[1:2]:
            module = command.load()
            p = sub.add_parser(name, help=command.help, description=command.help)
            add = getattr(module, f"add_{name.replace('-', '_')}_arguments", None) or module.add_arguments
            add(p)
            p.set_defaults(_module=module)
        else:
            sub.add_parser(name, help=command.help)
    return parser


def run_cli(
    commands: Mapping[str, Command],
    argv: Sequence[str] | None = None,
    prog: str = "incident-memory",
    description: str = "",
) -> int:
    """Parse, run the subcommand's `run` (or `run_<cmd>`), and turn a `UserFacingError` into one line."""
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    args = build_parser(commands, prog, description).parse_args()
    module = args._module
    runner = getattr(module, f"run_{args.command.replace('-', '_')}", None) or module.run
    try:
        return int(runner(args) or 0)
    except UserFacingError as exc:
        print(f"{prog} {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(SUBCOMMANDS, argv)


if __name__ == "__main__":
    sys.exit(main())
