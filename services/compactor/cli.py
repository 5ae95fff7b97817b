"""`incident-memory compact --tool TOOL [--budget N] < raw.json` (a contract, see DESIGN.md).

Writes `{"tool": ..., "compact": {...}, "tokens": N}` to stdout and exits 0. Bad JSON, or
a raw not of the tool's format, exits 2 with one line on stderr and no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys

from schemas.events import canonical_json
from services.compactor.plugins import load_plugins
from services.compactor.registry import BudgetExceeded, RawFormatError, compact_tool_result
from services.runtime.errors import BadInput, UserFacingError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tool", required=True, help="tool name, e.g. query_loki (unknown tools: passthrough)"
    )
    parser.add_argument("--budget", type=int, default=None, help="token budget (default: the tool's)")
    parser.add_argument(
        "--evidence-id", default=None, help="evidence id to render (default: from the raw's hash)"
    )


def run(args: argparse.Namespace) -> int:
    if args.budget is not None and args.budget < 1:
        raise BadInput(f"--budget must be a positive integer, got {args.budget}")
    load_plugins()
    text = sys.stdin.read()
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"stdin is not JSON: {exc}") from None
    context = {"evidence_id": args.evidence_id} if args.evidence_id else {}
    try:
        outcome = compact_tool_result(args.tool, raw, context, budget=args.budget)
    except RawFormatError as exc:
        raise BadInput(str(exc).splitlines()[0] if str(exc) else "raw is not of the tool's format") from None
    except BudgetExceeded as exc:
        raise UserFacingError(str(exc)) from None
    sys.stdout.write(
        canonical_json({"tool": args.tool, "compact": outcome.compact, "tokens": outcome.tokens}) + "\n"
    )
    return 0
