"""Strict JSON decoding for input from outside: raw tool results, event bytes, request bodies.

Why not `json.loads`. It accepts input that is not JSON, or that breaks us later, far from the edge:

- `NaN`, `Infinity`, `-Infinity` (not JSON: RFC 8259 section 6) and numbers such as `1e999` that
  overflow to infinity: a raw kept "verbatim" would be written back as `NaN` or `null`.
- a lone surrogate (`"\\ud800"`): the string cannot be encoded as UTF-8, so hashing, producing
  or storing it raises UnicodeEncodeError later.
- an integer longer than Python's int/str limit (4300 digits): ValueError, not JSONDecodeError.
- deep nesting: RecursionError in the decoder (about 1000 levels), or later when the value is
  validated or serialised again ("Maximum serialization depth exceeded").
- bytes that are not UTF-8: `json.loads(bytes)` guesses UTF-16/32; RFC 8259 section 8.1 says UTF-8.

`loads_strict` is the one rule for all of them. Every edge that decodes JSON from outside calls it
(the `compact` command, the compactor stream, ingest's HTTP bodies), so that the same bytes are
refused everywhere, with the same reason: a `StrictJsonError` (a ValueError) whose message is one
short ASCII line naming what and where: a JSON path (`$.data.result[3].values[0][0]`) for a value,
a line, column and char offset for the text, a byte offset for the encoding.

The nesting depth is measured before decoding, iteratively over the bytes, so no recursion ever
starts on deep input. Integers and floats are checked as the decoder reads them; the tree is walked
(iteratively) only to locate a problem, or when the text may hold a surrogate, so that valid input
costs one decode and one scan.

Duplicate keys are not detected: the last one wins, as in `json` and most decoders (detecting them
would cost a Python call per object on every valid input). A refused number is refused even when a
later value of its key replaces it; a lone surrogate so replaced is gone from the value, which is
what the rule protects.

Pure, no I/O.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from itertools import accumulate
from typing import Any

MAX_DEPTH = 256  # nested arrays/objects; a scalar at the top is depth 0, `[]` is depth 1
MAX_NUMBER_DIGITS = 1000  # characters of one number literal (an integer's digits, or a float's text)


class StrictJsonError(ValueError):
    """The input is not JSON we accept. The message is one short ASCII line naming what and where."""


class _Rejected:
    """Stands in the decoded tree for a number that must be refused, until the walk finds its path."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


# The depth scan: escapes that could hide a quote go first (`\\` then `\"`), then every byte but
# quotes and brackets; what lies between quotes is inside a string.
_KEEP = b'[]{}"'
_DROP = bytes(b for b in range(256) if b not in _KEEP)
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 / -1 as signed bytes
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)  # only to locate a too deep nesting

# A decoded string holds a lone surrogate only if the text holds one, or an escape of one that the
# decoder cannot pair: `\uD800`-`\uDBFF` not followed by `\uDC00`-`\uDFFF`, or one of these not
# preceded by the former. Searched once escaped backslashes (`\\`) are gone; a match only means
# that the tree is walked, which decides.
_LONE_ESCAPE = re.compile(
    r"\\u[dD](?:[89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|[c-fC-F](?<!\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F]))"
)
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")
_PATH_CHARS = 200
_LITERAL_CHARS = 24


def loads_strict(
    data: bytes | bytearray | memoryview | str,
    *,
    max_depth: int = MAX_DEPTH,
    max_int_digits: int = MAX_NUMBER_DIGITS,
) -> Any:
    """Decode JSON, refusing with a `StrictJsonError` what is not JSON or cannot be kept as it came.

    Refused: bytes that are not UTF-8; text that is not JSON; nesting deeper than `max_depth`;
    an integer of more than `max_int_digits` digits (or a float literal of more characters);
    `NaN`, `Infinity`, `-Infinity` and floats that overflow (`1e999`); lone surrogates in strings
    or keys. Duplicate keys: the last wins (not detected); a refused number under either is refused.
    """
    if max_depth < 1 or max_int_digits < 1:
        raise ValueError("max_depth and max_int_digits must be >= 1")
    literal_surrogate = False
    if isinstance(data, str):
        text = data
        try:
            encoded = data.encode("utf-8")
        except UnicodeEncodeError:
            encoded, literal_surrogate = data.encode("utf-8", "surrogatepass"), True
    else:
        encoded = bytes(data)
        try:
            text = encoded.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictJsonError(
                f"not UTF-8: {exc.reason} (byte 0x{encoded[exc.start]:02x}) at byte {exc.start}"
            ) from None
    _check_depth(encoded, text, max_depth)
    flagged: list[str] = []  # the reasons of the numbers refused while decoding

    def parse_int(literal: str) -> Any:
        digits = len(literal) - (literal[0] == "-")
        if digits > max_int_digits:
            return _reject(f"an integer of {digits} digits (at most {max_int_digits})")
        return int(literal)

    def parse_float(literal: str) -> Any:
        if len(literal) > max_int_digits:
            return _reject(f"a number of {len(literal)} characters (at most {max_int_digits})")
        value = float(literal)
        if math.isinf(value):
            return _reject(f"{_clip(literal, _LITERAL_CHARS)} overflows a float")
        return value

    def parse_constant(literal: str) -> Any:
        return _reject(f"{literal} is not JSON (no NaN or Infinity)")

    def _reject(reason: str) -> _Rejected:
        flagged.append(reason)
        return _Rejected(reason)

    try:
        value = json.loads(text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant)
    except json.JSONDecodeError as exc:
        raise StrictJsonError(f"not JSON: {exc.msg} at {_where(exc.lineno, exc.colno, exc.pos)}") from None
    except ValueError as exc:  # int()'s own digit limit, should `max_int_digits` exceed it
        raise StrictJsonError(f"not JSON: {_clip(str(exc), 120)}") from None
    except RecursionError:  # unreachable after the depth scan; a guard, should the call stack be deep
        raise StrictJsonError(f"nesting too deep to decode (at most {max_depth})") from None
    if flagged or literal_surrogate or ("\\u" in text and _LONE_ESCAPE.search(text.replace("\\\\", ""))):
        _walk(value)
    if flagged:  # refused, then overwritten by a later value of the same key: refused all the same
        raise StrictJsonError(f"{flagged[0]} under a key given twice in its object")
    return value


def _where(line: int, column: int, pos: int) -> str:
    return f"line {line} column {column} (char {pos})"


def _check_depth(encoded: bytes, text: str, max_depth: int) -> None:
    """Refuse nesting deeper than `max_depth`, without recursion and before any decoding."""
    if encoded.count(b"[") + encoded.count(b"{") <= max_depth:
        return
    kept = encoded.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _DROP)
    outside = kept.replace(b'""', b"")  # every string, when none holds a bracket
    if b'"' in outside:  # one does (or the quotes do not pair: invalid JSON, the decoder says so)
        outside = b"".join(kept.split(b'"')[0::2])
    # Each pass strips the innermost pairs everywhere: one level at least, two at most (`{[]}`).
    rest, passes = outside, 0
    while rest and passes <= max_depth:
        shorter = rest.replace(b"[]", b"").replace(b"{}", b"")
        if len(shorter) == len(rest):
            break  # unbalanced: measured exactly below
        rest, passes = shorter, passes + 1
    if not rest and 2 * passes <= max_depth:
        return
    if passes <= max_depth and max(accumulate(array("b", outside.translate(_STEPS))), default=0) <= max_depth:
        return
    depth = 0
    for match in _TOKEN.finditer(encoded):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            if depth > max_depth:
                pos = len(encoded[: match.start()].decode("utf-8", "surrogatepass"))
                line = text.count("\n", 0, pos) + 1
                column = pos - (text.rfind("\n", 0, pos) + 1) + 1
                raise StrictJsonError(f"nesting deeper than {max_depth} at {_where(line, column, pos)}")
        elif token in (b"]", b"}"):
            depth -= 1
    # Not reached for valid JSON (both scans read it alike); invalid JSON is left to the decoder.


Path = tuple[Any, ...] | None  # (parent path, key or index), built only as deep as the walk goes


def _walk(value: Any) -> None:
    """Find, in document order, the first refused number or surrogate; raise naming its path."""
    stack: list[tuple[Any, Path]] = [(value, None)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if not node.isascii() and _SURROGATE.search(node):
                raise StrictJsonError(f"{_surrogate(node)} in a string at {_path(path)}")
        elif isinstance(node, _Rejected):
            raise StrictJsonError(f"{node.reason} at {_path(path)}")
        elif isinstance(node, dict):
            children = []
            for key, child in node.items():
                if not key.isascii() and _SURROGATE.search(key):
                    raise StrictJsonError(f"{_surrogate(key)} in a key of {_path(path)}")
                children.append((child, (path, key)))
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend((node[i], (path, i)) for i in range(len(node) - 1, -1, -1))


def _surrogate(text: str) -> str:
    match = _SURROGATE.search(text)
    assert match is not None
    return f"a lone surrogate \\u{ord(match.group()):04x}"


def _path(path: Path) -> str:
    """`$.data.result[3].values[0][0]`; odd keys quoted (ASCII, clipped); a long path cut in the middle."""
    parts: list[str] = []
    while path is not None:
        path, key = path
        if isinstance(key, int):
            parts.append(f"[{key}]")
        elif _NAME.fullmatch(key):
            parts.append(f".{key}")
        else:
            shown = key if len(key) <= _LITERAL_CHARS else key[: _LITERAL_CHARS - 3] + "..."
            parts.append("[" + json.dumps(shown.encode("utf-8", "replace").decode()) + "]")
    text = "$" + "".join(reversed(parts))
    if len(text) > _PATH_CHARS:
        text = text[:60] + "..." + text[-(_PATH_CHARS - 63) :]
    return text


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = ["MAX_DEPTH", "MAX_NUMBER_DIGITS", "StrictJsonError", "loads_strict"]
