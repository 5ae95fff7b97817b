"""schemas.strict_json: what it refuses, why and where; and fuzzing that it never does anything else.

The rule under test: `loads_strict` returns a value or raises StrictJsonError, never anything else
(no RecursionError, no int-limit ValueError, no UnicodeError); a value it returns equals what
`json.loads` reads from the same text, and can be written back as strict UTF-8 JSON.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.strict_json import MAX_DEPTH, StrictJsonError, loads_strict


def refused(data: bytes | str, **kw: Any) -> str:
    with pytest.raises(StrictJsonError) as err:
        loads_strict(data, **kw)
    message = str(err.value)
    assert "\n" not in message and message.isascii() and len(message) < 400, message
    return message


def depth(value: Any) -> int:
    """Containers nested: a scalar is 0, `[]` is 1, `[[]]` is 2."""
    stack, deepest = [(value, 0)], 0
    while stack:
        node, outer = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, outer + 1)
            stack.extend((child, outer + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def written_back(value: Any) -> bytes:
    """Strict JSON again: no NaN or Infinity, no lone surrogate (encode would raise)."""
    return json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")


# --- each rule, with its reason and where ------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nesting deeper than 256 at line 1 column 257 (char 256)"),
        (b'{"a":' * 100_000, "nesting deeper than 256 at line 1 column 1281 (char 1280)"),
        (b'{"n":' + b"9" * 5000 + b"}", "an integer of 5000 digits (at most 1000) at $.n"),
        (b"[-" + b"1" * 1001 + b"]", "an integer of 1001 digits (at most 1000) at $[0]"),
        (b'{"a":[0.' + b"1" * 1000 + b"]}", "a number of 1002 characters (at most 1000) at $.a[0]"),
        (b'{"data":{"result":[1,{"v":NaN}]}}', "NaN is not JSON (no NaN or Infinity) at $.data.result[1].v"),
        (b"[Infinity]", "Infinity is not JSON"),
        (b'{"x":-Infinity}', "-Infinity is not JSON (no NaN or Infinity) at $.x"),
        (b'{"x":[1e999]}', "1e999 overflows a float at $.x[0]"),
        (b'{"x":-1' + b"0" * 400 + b".0}", "overflows a float at $.x"),
        (b'{"s":"\\ud800"}', "a lone surrogate \\ud800 in a string at $.s"),
        (b'{"s":"\\udc00\\ud800"}', "a lone surrogate \\udc00 in a string at $.s"),
        (b'{"\\udfff":1}', "a lone surrogate \\udfff in a key of $"),
        (b'{"odd key":[{"a b":"\\ud800"}]}', 'in a string at $["odd key"][0]["a b"]'),
        (b'{"a":"\xff"}', "not UTF-8: invalid start byte (byte 0xff) at byte 6"),
        (b'"\xed\xa0\x80"', "not UTF-8"),  # a surrogate encoded in UTF-8 bytes
        (b"\xef\xbb\xbf{}", "not JSON: Unexpected UTF-8 BOM"),
        ("\ufeff{}".encode("utf-16"), "not UTF-8"),
        (b"", "not JSON: Expecting value at line 1 column 1 (char 0)"),
        (b'{"a":1', "not JSON: Expecting ',' delimiter at line 1 column 7 (char 6)"),
        (b"[1] [2]", "not JSON: Extra data"),
        # found by the fuzz test below: a refused number hidden by a later value of its key
        (
            b'{"a":' + b"9" * 4301 + b',"a":0}',
            "an integer of 4301 digits (at most 1000) under a key given twice",
        ),
        (b'{"a":NaN,"a":1}', "NaN is not JSON (no NaN or Infinity) under a key given twice"),
    ],
)
def test_refusals_name_what_and_where(data: bytes, reason: str) -> None:
    assert reason in refused(data)


def test_a_str_holding_a_lone_surrogate_is_refused() -> None:
    assert "lone surrogate \\ud800 in a string at $[0]" in refused('["\ud800"]')


def test_long_paths_and_keys_stay_short() -> None:
    key = "k" * 5000
    message = refused(json.dumps({key: [[{"x": {key: 1}}]] * 3}).replace("1}", "NaN}").encode())
    assert message.startswith("NaN is not JSON") and "..." in message


@pytest.mark.parametrize("n", [1, 255, 256])
def test_nesting_up_to_the_limit_is_accepted(n: int) -> None:
    assert depth(loads_strict(b"[" * n + b"]" * n)) == n
    assert depth(loads_strict(b'{"a":' * n + b"0" + b"}" * n)) == n


def test_brackets_and_escaped_quotes_inside_strings_are_not_nesting() -> None:
    text = '["' + "[{" * 600 + '", "\\"[[[[", "\\\\", {"k\\"[": "]]]"}]'
    assert loads_strict(text.encode())[2] == "\\"
    assert "nesting deeper than 3" in refused(b'[[[["x"]]]]', max_depth=3)
    assert loads_strict(b'[[["[[[[[["]]]', max_depth=3) == [[["[[[[[["]]]


def test_limits_are_parameters() -> None:
    assert loads_strict(b"[" + b"7" * 2000 + b"]", max_int_digits=2000) == [int("7" * 2000)]
    assert "at most 10" in refused(b"12345678901", max_int_digits=10)


def test_valid_json_is_read_as_json_reads_it() -> None:
    text = '{"a": [1, -2.5, 1e300, "x\\u00e9\\ud83d\\ude00", null, true, false, {}], "a": 2, "é": "²"}'
    assert loads_strict(text) == loads_strict(text.encode()) == json.loads(text) == {"a": 2, "é": "²"}


def test_refused_text_is_never_decoded_by_recursion() -> None:
    """100,000 levels inside an array, an object and a string: no RecursionError, quickly."""
    deep = b'{"a":[' * 50_000
    assert "nesting deeper than 256" in refused(deep)
    assert loads_strict(b'"' + b"[" * 100_000 + b'"') == "[" * 100_000


# --- fuzz: raw bytes, and JSON text with extreme values --------------------------------------


def _check(data: bytes | str) -> None:
    try:
        value = loads_strict(data)
    except StrictJsonError as exc:
        message = str(exc)
        assert message and "\n" not in message and message.isascii()
        return
    assert value == json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    written_back(value)
    assert depth(value) <= MAX_DEPTH


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_raw_bytes(data: bytes) -> None:
    _check(data)


_EXTREME_NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.integers(min_value=990, max_value=5000).map(lambda n: "9" * n),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e-999", "-0", "-0.0", "1E+308"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
_STRING_BODIES = st.one_of(
    st.text(max_size=12).map(lambda s: json.dumps(s)[1:-1]),
    st.sampled_from(
        [
            "\\ud800",
            "\\udfff",
            "\\ud83d\\ude00",
            "\\ude00\\ud83d",
            "\\\\ud800",
            '\\"',
            "²",
            "١٢٣",
            "３",
            "0001-01-01T00:00:00Z",
            "10000-01-01T00:00:00Z",
            "9999-12-31T23:59:59-14:00",
            "[[[{{{",
        ]
    ),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF).map(lambda c: f"\\u{ord(c):04x}"),
)
_SCALARS = st.one_of(
    _EXTREME_NUMBERS,
    _STRING_BODIES.map(lambda body: f'"{body}"'),
    st.sampled_from(["true", "false", "null"]),
)


def _deep(child: str, n: int, kind: str) -> str:
    return ("[" * n + child + "]" * n) if kind == "[" else ('{"k":' * n + child + "}" * n)


_TREES = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(_STRING_BODIES, children), max_size=4).map(
            lambda kvs: "{" + ",".join(f'"{k}":{v}' for k, v in kvs) + "}"
        ),
        st.tuples(children, st.integers(min_value=1, max_value=2000), st.sampled_from("[{")).map(
            lambda t: _deep(*t)
        ),
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TREES, st.booleans())
def test_fuzz_json_trees_with_extreme_values(text: str, as_bytes: bool) -> None:
    _check(text.encode("utf-8", "surrogatepass") if as_bytes else text)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_fuzz_every_valid_tree_is_accepted_unchanged(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False)):
        assert loads_strict(text.encode()) == value
