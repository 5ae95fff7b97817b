"""Compactors a deployment could load with COMPACTOR_PLUGINS; these two are broken on purpose.

The hostile-input test loads them into a real worker process, to show that a compactor
which raises, and one whose digest is over its budget, each cost one dead letter and
nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.compaction.model import Draft, Item

VERSION = "test.1"
BUDGET = 120


def raising(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    """A compactor with a bug: it fails on every raw."""
    raise RuntimeError(f"plugin bug while compacting {evidence_id}")


def overshooting(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    """A compactor whose smallest header holds every line: nothing the call path may leave out
    would make it fit, so only its guard (BudgetExceeded) can answer."""
    lines = [str(line) for line in raw.get("lines", [])] if isinstance(raw, dict) else [str(raw)]
    header = {"evidence": evidence_id, "all": lines}
    return Draft(headers=(header,), section="lines", kind="lines", unit="lines", items=())


def upper(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    """A well-behaved one: the raw's lines, upper-cased, each an item."""
    lines = [str(line).upper() for line in raw.get("lines", [])] if isinstance(raw, dict) else []
    items = tuple(Item(id=f"l{i}", forms=(line,)) for i, line in enumerate(lines))
    return Draft(
        headers=({"evidence": evidence_id},), section="lines", kind="lines", unit="lines", items=items
    )
