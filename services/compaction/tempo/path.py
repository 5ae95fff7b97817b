"""tempo: the critical path (docs/compaction.md)."""

from __future__ import annotations

from collections.abc import Sequence

from services.compaction.model import Item
from services.compaction.render import clip
from services.compaction.tempo.parse import (
    _ARROW,
    _FULL_PATH_STEPS,
    _HEAVY_SHARE,
    _NAME_CHARS,
    _SERVICE_CHARS,
    Span,
)
from services.compaction.tempo.render import ms


def _steps(path: Sequence[Span], shown: Sequence[int], name_chars: int, mark_errors: bool) -> str:
    """The shown steps of the path, `…k` where k steps are skipped; a step's service where it changes."""
    out: list[str] = []
    last_service: str | None = None
    previous = -1
    for i in shown:
        if i != previous + 1:
            out.append(f"…{i - previous - 1}")
        s = path[i]
        svc = f"{clip(s.service, _SERVICE_CHARS)} " if s.service != last_service else ""
        flag = " ERROR" if mark_errors and s.error else ""
        out.append(f"{svc}{clip(s.name, name_chars)} {ms(s.duration)}ms{flag}")
        last_service = s.service
        previous = i
    return _ARROW.join(out)


def _bounded(indexes: Sequence[int]) -> list[int]:
    """At most `_FULL_PATH_STEPS` of the steps: the first ones and the last ones, the middle counted."""
    if len(indexes) <= _FULL_PATH_STEPS:
        return list(indexes)
    half = _FULL_PATH_STEPS // 2
    return [*indexes[:half], *indexes[-half:]]


def _path_item(path: Sequence[Span], level: str) -> Item:
    """The critical path at three resolutions: every step; the root, the steps that hold the path
    longest (their time minus the next step's, at least a tenth of the root's) and the deepest; the
    root and the deepest. It counts no spans (n=0): they are counted in their groups."""
    last = len(path) - 1
    root_ns = path[0].duration
    held = [s.duration - (path[i + 1].duration if i < last else 0) for i, s in enumerate(path)]
    heavy = [
        i for i in range(len(path)) if i in (0, last) or (root_ns > 0 and held[i] * _HEAVY_SHARE >= root_ns)
    ]
    head = f"critical path ({len(path)} spans): "
    forms = (
        head + _steps(path, _bounded(range(len(path))), _NAME_CHARS[0], True),
        head + _steps(path, _bounded(heavy), _NAME_CHARS[1], False),
        head + _steps(path, sorted({0, last}), _NAME_CHARS[1], False),
    )
    return Item(id="path", forms=tuple(dict.fromkeys(forms)), n=0, level=level, pinned=True, members=0)
