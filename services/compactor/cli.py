"""`incident-memory compact --tool TOOL [--budget N] < raw.json` (a contract, see README.md).

Writes `{"tool": ..., "compact": {...}, "tokens": N}` to stdout and exits 0. Input it cannot accept
exits 2 with one line on stderr and no traceback: stdin that is not strict JSON (`loads_strict`: not
UTF-8, NaN, lone surrogates, huge integers, nesting deeper than 256...), or a raw not of the tool's
format (times included: `timefmt`). These are the rules the compactor stream dead-letters by, with
the same reasons. A digest over its budget, or a compactor that fails on a raw it accepted (a bug),
exits 1 with one line.
"""

from __future__ import annotations

import argparse
import sys

from schemas.events import canonical_json
from schemas.strict_json import StrictJsonError, loads_strict
from services.compaction.registry import (
    BUILTIN,
    BudgetExceeded,
    CompactorConfig,
    RawFormatError,
    compact_tool_result,
    load_config,
)
from services.runtime.errors import BadInput, UserFacingError

MESSAGE_CHARS = 300  # a reason quotes the raw at most this much: one readable line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tool", required=True, help="tool name, e.g. query_loki (unknown tools: passthrough)"
    )
    parser.add_argument("--budget", type=int, default=None, help="token budget (default: the tool's)")
    parser.add_argument(
        "--evidence-id", default=None, help="evidence id to render (default: from the raw's hash)"
    )


def one_line(text: str, fallback: str) -> str:
    """The first line of a message, clipped and printable: what the one stderr line may say."""
    line = text.strip().splitlines()[0] if text.strip() else fallback
    line = line.encode("utf-8", "backslashreplace").decode("utf-8")  # no lone surrogate reaches stderr
    return line if len(line) <= MESSAGE_CHARS else line[: MESSAGE_CHARS - 3] + "..."


def compact_stdin(
    data: bytes,
    tool: str,
    *,
    budget: int | None = None,
    evidence_id: str | None = None,
    config: CompactorConfig = BUILTIN,
) -> str:
    """The command without its I/O: stdin's bytes -> stdout's text. Pure; `config` holds the plugins.

    BadInput for input it cannot accept; UserFacingError for a digest over its budget. Anything else
    a compactor raises propagates (`run` reports it as a bug).
    """
    if budget is not None and budget < 1:
        raise BadInput(f"--budget must be a positive integer, got {budget}")
    try:
        raw = loads_strict(data)
    except StrictJsonError as exc:
        raise BadInput(one_line(f"stdin: {exc}", "stdin is not JSON")) from None
    context = {"evidence_id": evidence_id} if evidence_id else {}
    try:
        outcome = compact_tool_result(tool, raw, context, budget=budget, config=config)
    except RawFormatError as exc:
        raise BadInput(one_line(str(exc), "raw is not of the tool's format")) from None
    except BudgetExceeded as exc:
        raise UserFacingError(one_line(str(exc), "digest over its budget")) from None
    return canonical_json({"tool": tool, "compact": outcome.compact, "tokens": outcome.tokens}) + "\n"


def run(args: argparse.Namespace) -> int:
    config = load_config()
    data = sys.stdin.buffer.read()
    try:
        text = compact_stdin(data, args.tool, budget=args.budget, evidence_id=args.evidence_id, config=config)
    except UserFacingError:
        raise
    except Exception as exc:  # a compactor bug: one line, as the stream's "compactor error" dead letter
        reason = one_line(f"{type(exc).__name__}: {exc}", type(exc).__name__)
        raise UserFacingError(f"compactor error (a bug, please report it): {reason}") from None
    sys.stdout.write(text)
    return 0
