"""Discussion vectors as recall's scoring compares them (pure): the optional "embedding" part.

Absent unless an embedding endpoint is configured and both discussions have a vector
(`schemas/recall_embedding.py` reads and asks for them); every figure without it is the same as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Embedding:
    """A discussion's vector and the model that made it (vectors of two models never compare). Its length is
    computed once: a recall compares the query's vector with every candidate's."""

    model: str
    vector: tuple[float, ...]
    norm: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "norm", math.sqrt(sum(x * x for x in self.vector)))


def cosine(a: Embedding | None, b: Embedding | None) -> float | None:
    """The similarity of two discussions' vectors, clamped to [0, 1]; None unless both are given, by one
    model, of one length and neither zero: then the part is absent, not zero."""
    if a is None or b is None or a.model != b.model or len(a.vector) != len(b.vector):
        return None
    norms = a.norm * b.norm
    if norms == 0.0:
        return None
    dot = sum(x * y for x, y in zip(a.vector, b.vector, strict=True))
    return round(min(1.0, max(0.0, dot / norms)), 4)


def embedding_reason(model: str, similarity: float) -> str:
    """A hit scored with the signal says so, and by which model."""
    return f"discussion alike by embeddings ({model}, {similarity:.2f})"
