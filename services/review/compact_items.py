"""The lines of a compact a reader can drill into: one list of the digest, each line with its position.

The position is the item's index in the page's links, so every tool's items are numbered the same way,
including the lines a tool's reader skips.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any


def matched_lines(
    compact: Any, key: str, pattern: re.Pattern[str]
) -> Iterator[tuple[int, str, re.Match[str]]]:
    """(index, text, match) of each line of `compact[key]` that `pattern` matches; nothing if there is no list."""
    lines = compact.get(key) if isinstance(compact, dict) else None
    for index, line in enumerate(lines if isinstance(lines, list) else []):
        text = str(line)
        m = pattern.match(text)
        if m is not None:
            yield index, text, m
