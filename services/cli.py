"""`incident-memory`: the one entry point (a contract; see DESIGN.md, "Command line").

Each subcommand lives in the module that owns it, which exposes
`add_arguments(parser)` and `run(args) -> int`. Modules are imported only
when their subcommand runs, so `compact` does not pay for LangGraph.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from services.runtime.errors import UserFacingError

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "up": ("deploy.local.stack_cli", "start the local stack (Kafka in KRaft mode, PostgreSQL)"),
    "down": ("deploy.local.stack_cli", "stop what `up` started"),
    "migrate": ("services.migrate_cli", "apply the SQL migrations and create the topics"),
    "demo": ("deploy.local.demo", "run the seed incident end to end and print its table"),
    "ingest": ("services.ingest.main", "run the ingest HTTP service (Slack, Alertmanager)"),
    "compactor": ("services.compactor.app", "run a compactor worker (faust-streaming)"),
    "projector": ("services.projector.main", "run the projector (Kafka -> Postgres)"),
    "agent": ("services.agent.main", "run the agent (wake consumer, LangGraph)"),
    "slack": ("services.voice.main", "run the Slack poster (the agent's voice, exactly once)"),
    "telemetry-mcp": ("services.telemetry_mcp.server", "run the telemetry MCP server"),
    "replay": ("services.projector.replay", "re-derive the projection from the topics"),
    "rederive": ("services.rederive.main", "re-derive through a new compactor, blue/green, with a diff"),
    "show": ("services.projector.show", "print a thread's row-by-row table"),
    "recall": ("services.projector.recall_cli", "similar and concurrent incidents, with their reasons"),
    "threads": ("services.projector.show_threads", "list threads with status, rounds and tokens"),
    "review": ("services.review.main", "serve the read-only review page (raw beside compact, per row)"),
    "compact": ("services.compactor.cli", "compact one raw tool result read from stdin"),
    "bench": ("benchmarks.run", "run the benchmarks and write BENCHMARKS.md"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="incident-memory", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if name in sys.argv[1:2]:
            module = importlib.import_module(module_name)
            p = sub.add_parser(name, help=help_text, description=help_text)
            add = getattr(module, f"add_{name.replace('-', '_')}_arguments", None) or module.add_arguments
            add(p)
            p.set_defaults(_module=module)
        else:
            sub.add_parser(name, help=help_text)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    args = build_parser().parse_args()
    module = args._module
    runner = getattr(module, f"run_{args.command.replace('-', '_')}", None) or module.run
    try:
        return int(runner(args) or 0)
    except UserFacingError as exc:
        print(f"incident-memory {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
