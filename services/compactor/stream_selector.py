"""Which selector a worker uses, and a wrapper that counts every call to it.

`--selector local` (the deterministic rule), `openai` (a small model through
langchain-openai) or `package.module:Class` (any class with `select(...)`, built
with no arguments) — the last one is how a deployment plugs in its own model, and
how tests plug in theirs, without test code in the service. Every real call is
counted and logged, so a replay can show that a recorded choice was reused and the
model was not asked again (invariant 8).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from schemas.events import Selection
from services.compaction.selector import Candidate, LocalDeterministicSelector, OpenAISelector, Selector
from services.runtime.errors import UserFacingError
from services.runtime.loading import load_attr

log = logging.getLogger(__name__)


def load_selector(spec: str) -> Selector:
    """Build the selector named by `spec`; UserFacingError when it cannot be loaded."""
    if spec == "local":
        return LocalDeterministicSelector()
    if spec == "openai":
        return OpenAISelector()
    if ":" not in spec:
        raise UserFacingError(f"--selector {spec!r}: expected local, openai or package.module:Class")
    _, factory = load_attr(spec, f"--selector {spec!r}", kind="Class")
    selector = factory()
    if not callable(getattr(selector, "select", None)):
        raise UserFacingError(f"--selector {spec!r} has no select(candidates, budget, context) method")
    return selector  # type: ignore[no-any-return]


class CountingSelector:
    """Delegates to a selector and reports each call (a metric and a log line)."""

    def __init__(self, inner: Selector, on_call: Callable[[str], None] | None = None) -> None:
        self.inner = inner
        self.model = str(getattr(inner, "model", type(inner).__name__))
        self.calls = 0
        self._on_call = on_call

    def select(self, candidates: list[Candidate], budget: int, context: dict[str, Any]) -> Selection:
        self.calls += 1
        if self._on_call is not None:
            self._on_call(self.model)
        log.info(
            "selector called", extra={"model": self.model, "candidates": len(candidates), "room": budget}
        )
        return self.inner.select(candidates, budget, context)
