"""Are a query's label selectors confined to the incident's scope? Pure, and fail closed.

PromQL is parsed by `promql-parser` (the Rust parser of GreptimeDB's, Python bindings): every
vector selector of the expression is checked, not only the first, and `offset` / `@` (which
reach outside the window) are refused. No maintained LogQL parser is on PyPI, so the LogQL stream
selector is read by the small strict grammar below; whatever it cannot read is refused.

A selector is in scope when, for every scope label, some matcher pins that label to allowed
values: `label="v"` with v allowed, or `label=~"a|b"` whose regex is a plain alternation of
literals, all allowed (Loki and Prometheus anchor label regexes, so it can match nothing else).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import promql_parser

Allowed = Mapping[str, frozenset[str]]

_STRING = r'"(?:[^"\\]|\\.)*"|`[^`]*`'
_MATCHER = re.compile(rf"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*({_STRING})\s*")
_REGEX_META = set(".^$*+?()[]{}\\|")


class OutOfScope(ValueError):
    """The query could reach series or streams outside the incident's scope (or could not be read)."""


@dataclass(frozen=True)
class LabelMatcher:
    label: str
    op: str  # = != =~ !~
    value: str


def _unquote(literal: str) -> str:
    if literal.startswith("`"):
        return literal[1:-1]
    try:
        return str(json.loads(literal))
    except json.JSONDecodeError:
        raise OutOfScope(f"cannot read the string {literal}") from None


def literal_alternatives(regex: str) -> list[str] | None:
    """`a|b\\.c` -> ["a", "b.c"]; None when the regex is anything but literals joined by `|`."""
    out, current, i = [], [], 0
    while i < len(regex):
        ch = regex[i]
        if ch == "\\" and i + 1 < len(regex) and not regex[i + 1].isalnum():
            current.append(regex[i + 1])
            i += 2
            continue
        if ch == "|":
            out.append("".join(current))
            current = []
        elif ch in _REGEX_META:
            return None
        else:
            current.append(ch)
        i += 1
    out.append("".join(current))
    return out


def pins(matcher: LabelMatcher, allowed: frozenset[str]) -> bool:
    """Does this matcher alone confine its label to allowed values?"""
    if matcher.op == "=":
        return matcher.value in allowed
    if matcher.op == "=~":
        values = literal_alternatives(matcher.value)
        return values is not None and all(v in allowed for v in values)
    return False


def check_matchers(matchers: Iterable[LabelMatcher], scope: Allowed, what: str) -> None:
    """Raise OutOfScope unless every scope label is pinned to its allowed values."""
    given = list(matchers)
    for label, allowed in sorted(scope.items()):
        if not any(m.label == label and pins(m, allowed) for m in given):
            shown = ", ".join(f'{label}="{v}"' for v in sorted(allowed)) or "(none known)"
            raise OutOfScope(f"{what} must pin {label} to this incident's scope: {shown}")


def logql_stream_selector(query: str) -> tuple[LabelMatcher, ...]:
    """The matchers of a LogQL log query's stream selector; the rest may only be a pipeline."""
    text = query.strip()
    if not text.startswith("{"):
        raise OutOfScope("a LogQL query must start with its stream selector {...} (log queries only)")
    matchers: list[LabelMatcher] = []
    pos = 1
    while True:
        closing = re.compile(r"\s*}").match(text, pos)
        if closing:
            pos = closing.end()
            break
        found = _MATCHER.match(text, pos)
        if found is None:
            raise OutOfScope(f"cannot read the stream selector at {text[pos : pos + 40]!r}")
        label, op, literal = found.groups()
        matchers.append(LabelMatcher(label, op, _unquote(literal)))
        pos = found.end()
        if text.startswith(",", pos):
            pos += 1
    rest = re.sub(_STRING, '""', text[pos:])
    if re.search(r"[{}\[\]]", rest):
        raise OutOfScope("only one stream selector and a line pipeline are allowed (no metric queries)")
    return tuple(matchers)


def check_logql(query: str, scope: Allowed) -> None:
    check_matchers(logql_stream_selector(query), scope, "the LogQL stream selector")


_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}


def _promql_matchers(group: Iterable[Any]) -> list[LabelMatcher]:
    return [LabelMatcher(m.name, _OPS[str(m.op).rsplit(".", 1)[-1]], m.value) for m in group]


def promql_vector_selectors(query: str, max_range_s: float) -> list[list[list[LabelMatcher]]]:
    """Each vector selector as its matcher groups (one, or several joined by `or`)."""
    try:
        expr = promql_parser.parse(query)
    except ValueError as exc:
        raise OutOfScope(f"cannot parse the PromQL: {exc}") from None
    found: list[list[list[LabelMatcher]]] = []
    problems: list[str] = []

    def visit(node: Any) -> bool:
        kind = type(node).__name__
        if kind in ("VectorSelector", "SubqueryExpr") and (node.offset is not None or node.at is not None):
            problems.append("offset and @ modifiers are not allowed (they leave the pinned window)")
        if kind in ("MatrixSelector", "SubqueryExpr") and node.range.total_seconds() > max_range_s:
            problems.append(f"a range of {node.range} is longer than the allowed {int(max_range_s)}s")
        if kind == "VectorSelector":
            groups = node.matchers.or_matchers or [node.matchers.matchers]
            found.append([_promql_matchers(g) for g in groups])
        return True

    promql_parser.walk(expr, visit)
    if problems:
        raise OutOfScope(problems[0])
    if not found:
        raise OutOfScope("the PromQL expression selects no series")
    return found


def check_promql(query: str, scope: Allowed, max_range_s: float) -> None:
    for k, groups in enumerate(promql_vector_selectors(query, max_range_s), 1):
        for group in groups:
            check_matchers(group, scope, f"PromQL vector selector {k}")
