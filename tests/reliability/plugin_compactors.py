"""Compactors a deployment could load with COMPACTOR_PLUGINS; these two are broken on purpose.

The hostile-input test loads them into a real worker process, to show that a compactor
which raises, and one whose digest is over its budget, each cost one dead letter and
nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.compactor.model import Draft, Item

VERSION = "test.1"
BUDGET = 120


def raising(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    """A compactor with a bug: it fails on every raw."""
    raise RuntimeError(f"plugin bug while compacting {evidence_id}")


def overshooting(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    """A compactor that pins far more than its budget: nothing it may drop would make it fit."""
    lines = [str(line) for line in raw.get("lines", [])] if isinstance(raw, dict) else [str(raw)]
    items = tuple(Item(id=f"l{i}", body={"line": line}, pinned=True) for i, line in enumerate(lines))
    return Draft(header={"evidence_id": evidence_id}, section="lines", unit="lines", levels=(items,))


def upper(raw: Any, alert_context: Mapping[str, Any], evidence_id: str) -> Draft:
    """A well-behaved one: the raw's lines, upper-cased, with the evidence pointer."""
    lines = [str(line).upper() for line in raw.get("lines", [])] if isinstance(raw, dict) else []
    items = tuple(Item(id=f"l{i}", body={"line": line}) for i, line in enumerate(lines))
    header = {"evidence_id": evidence_id, "more": f"get_evidence({evidence_id})"}
    return Draft(header=header, section="lines", unit="lines", levels=(items,))
