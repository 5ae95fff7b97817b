"""Canonical JSON: the one rendering used for hashes, token counts and the bytes on the wire.

The definition is `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`:
every hash, every recorded selection key and every compact on a topic was made with it, so it must
never change (invariant 8). orjson renders it about five times faster (9 against 45 µs for a 4.4 KB raw
of the stream benchmark; with the checks below, 20 µs), and gives the very same text except where the
fast path below hands over to `json` itself:

- a float of magnitude below 1e-4: `json` writes `1e-05`, orjson `0.00001` (and `1e-7` for `1e-07`).
  Every other finite float is written alike (both print the shortest repr that round-trips);
- NaN and infinities: `json` writes `NaN`/`Infinity`, orjson `null`. A `null` in orjson's output is
  therefore read as "maybe a NaN" unless the caller says the value is `finite` (decoded by
  `loads_strict`, which refuses them, or pydantic's json-mode dump of a model without float-typed
  fields, which writes them as None);
- what orjson refuses and `json` may not: integers beyond 64 bits, keys that are not str, lone
  surrogates, nesting deeper than 255, subclasses of str/int/dict/list, dataclasses, datetimes.

The only inputs left on which the two differ are those `json` refuses outright and orjson renders
(a UUID, a plain Enum): `json` raises TypeError for them, this returns their orjson text. Nothing in
the pipeline passes one (its values come from JSON or from pydantic's json-mode dumps).
tests/test_canonical_json.py compares the two on generated values, the corpus and the seed.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
_TOKEN_START = frozenset(b"[:,")  # what precedes a value in compact JSON (or the text's start)
_NUMBER_CHARS = frozenset(b"0123456789.")
_DIGITS = frozenset(b"0123456789")
_DECIMAL_TINY = re.compile(rb"\.0000")
_EXPONENT_MINUS = re.compile(rb"e-")
_NULL = re.compile(rb"null")


def _refuse(value: Any) -> Any:
    """orjson's `default`: whatever it does not render itself is left to `json`."""
    raise TypeError


def reference_json(value: Any) -> str:
    """The definition of canonical JSON (`json`'s C encoder): what the fast path must equal."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _starts_value(out: bytes, i: int) -> bool:
    """Does a JSON value start at byte i of compact JSON (not inside a string, as far as it can tell)?"""
    if i > 0 and out[i - 1] == 0x2D:  # a minus sign
        i -= 1
    return i == 0 or out[i - 1] in _TOKEN_START


def _tiny_float(out: bytes) -> bool:
    """Does orjson's output hold a float token of magnitude below 1e-4 (written otherwise by `json`)?

    Such a token reads `0.0000...` or `<digits>e-<digits>`. Two scans of the bytes (a literal
    pattern's `search` is faster than `bytes.find` and than `finditer`), and a look at each match;
    a false alarm (the same bytes inside a string) only costs the fallback."""
    match = _DECIMAL_TINY.search(out)
    while match is not None:
        i = match.start()
        if i > 0 and out[i - 1] == 0x30 and _starts_value(out, i - 1):  # 0x30: "0"
            return True
        match = _DECIMAL_TINY.search(out, i + 5)
    match = _EXPONENT_MINUS.search(out)
    while match is not None:
        i = j = match.start()
        if i > 0 and out[i - 1] in _DIGITS:
            while j > 0 and out[j - 1] in _NUMBER_CHARS:
                j -= 1
            if _starts_value(out, j):
                return True
        match = _EXPONENT_MINUS.search(out, i + 2)
    return False


def _fast(value: Any, finite: bool) -> bytes | None:
    """orjson's rendering when it is provably `reference_json`'s, else None."""
    try:
        out = orjson.dumps(value, default=_refuse, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is one
        return None
    if not finite and _NULL.search(out):  # a None, or a NaN/infinity that `json` writes otherwise
        return None
    if _tiny_float(out):
        return None
    return out


def canonical_json(value: Any, *, finite: bool = False) -> str:
    """`reference_json(value)`, through orjson where that gives the same text.

    `finite=True` is the caller's word that the value holds no NaN or infinite float: a value
    decoded by `loads_strict`, or a pydantic json-mode dump of a model with no float-typed field
    (pydantic writes NaN inside `Any` as None). Wrongly given, a NaN would be written `null`."""
    out = _fast(value, finite)
    return out.decode() if out is not None else reference_json(value)


def canonical_json_bytes(value: Any, *, finite: bool = False) -> bytes:
    """`canonical_json(value).encode()`, without decoding orjson's bytes to encode them again."""
    out = _fast(value, finite)
    return out if out is not None else reference_json(value).encode()


__all__ = ["canonical_json", "canonical_json_bytes", "reference_json"]
