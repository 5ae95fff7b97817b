"""What the model is shown of a row written with bookkeeping beside its words. Pure.

Some rows keep, in their raw `content`, facts recorded for the record and never for the model: an ai or
judge row what its model calls were sent beside the rows (`sent`, issue 38), a post whom it answers
(`answers`), recall's row the call it was made for (`made_for`). The projector writes such a row with
`compact` = the content without them, so the model's view and its tokens are what they were before
the bookkeeping existed; whoever reads a row's written view from its content strips them the same way.
"""

from __future__ import annotations

from typing import Any, Final

BESIDE: Final = ("sent", "answers", "made_for")


def has_bookkeeping(content: Any) -> bool:
    return isinstance(content, dict) and any(key in content for key in BESIDE)


def model_view(content: Any) -> Any:
    """`content` without the keys recorded beside the model's view (`content` itself when it has none)."""
    if not has_bookkeeping(content):
        return content
    return {k: v for k, v in content.items() if k not in BESIDE}
