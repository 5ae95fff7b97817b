"""Label selectors of LogQL and PromQL, parsed just far enough to pick recorded series. Pure.

The recorded back end is not a query engine. It answers with the recorded streams
and series whose labels the query's selectors match, and applies LogQL line
filters, so a query for another app or another error string gets what a real
Loki would give it: less, or nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from services.telemetry_mcp.wire import ToolArgError

_IDENT = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_STRING = r'"(?:[^"\\]|\\.)*"|`[^`]*`'
_MATCHER = re.compile(rf"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*({_STRING})\s*")
_SELECTOR = re.compile(rf"({_IDENT})?\s*\{{((?:[^{{}}\"`]|{_STRING})*)\}}")
_LINE_FILTER = re.compile(rf"\s*(\|=|!=|\|~|!~)\s*({_STRING})")
_PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "atan2", "inf", "nan",
}  # fmt: skip


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        actual = labels.get(self.label, "")
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        found = re.fullmatch(self.value, actual) is not None
        return found if self.op == "=~" else not found


@dataclass(frozen=True)
class LineFilter:
    op: str
    value: str

    def keeps(self, line: str) -> bool:
        if self.op == "|=":
            return self.value in line
        if self.op == "!=":
            return self.value not in line
        found = re.search(self.value, line) is not None
        return found if self.op == "|~" else not found


@dataclass(frozen=True)
class LogQuery:
    matchers: tuple[Matcher, ...]
    line_filters: tuple[LineFilter, ...]

    def selects(self, labels: Mapping[str, str]) -> bool:
        return all(m.matches(labels) for m in self.matchers)

    def keeps(self, line: str) -> bool:
        return all(f.keeps(line) for f in self.line_filters)


def _unquote(literal: str) -> str:
    if literal.startswith("`"):
        return literal[1:-1]
    try:
        value = json.loads(literal)
    except json.JSONDecodeError:
        raise ToolArgError(f"bad string literal {literal}") from None
    return str(value)


def _compile(op: str, value: str) -> None:
    if op in ("=~", "!~", "|~"):
        try:
            re.compile(value)
        except re.error as exc:
            raise ToolArgError(f"bad regular expression {value!r}: {exc}") from None


def parse_matchers(body: str) -> tuple[Matcher, ...]:
    """Parse the inside of `{...}`: `label op "value"` pairs separated by commas."""
    matchers: list[Matcher] = []
    pos = 0
    body = body.strip().rstrip(",")
    while pos < len(body):
        match = _MATCHER.match(body, pos)
        if match is None:
            raise ToolArgError(f"cannot parse label matcher at {body[pos:]!r}")
        label, op, literal = match.groups()
        value = _unquote(literal)
        _compile(op, value)
        matchers.append(Matcher(label, op, value))
        pos = match.end()
        if pos < len(body):
            if body[pos] != ",":
                raise ToolArgError(f"expected ',' between label matchers at {body[pos:]!r}")
            pos += 1
    return tuple(matchers)


def parse_log_query(query: str) -> LogQuery:
    """A LogQL log query: a stream selector, then line filters; later pipeline stages are ignored."""
    text = query.strip()
    if not text.startswith("{"):
        raise ToolArgError(
            "the recorded back end answers LogQL log queries ({selector} |= ...); "
            "metric queries such as count_over_time need the http back end"
        )
    match = _SELECTOR.match(text)
    if match is None:
        raise ToolArgError(f"cannot parse the stream selector of {query!r}")
    matchers = parse_matchers(match.group(2))
    if not any(m.op in ("=", "=~") and not re.fullmatch(m.value, "") for m in matchers):
        raise ToolArgError("queries require at least one matcher that does not match the empty value")
    filters: list[LineFilter] = []
    pos = match.end()
    while True:
        lf = _LINE_FILTER.match(text, pos)
        if lf is None:
            break
        value = _unquote(lf.group(2))
        _compile(lf.group(1), value)
        filters.append(LineFilter(lf.group(1), value))
        pos = lf.end()
    return LogQuery(tuple(matchers), tuple(filters))


def promql_selectors(query: str) -> tuple[tuple[Matcher, ...], ...]:
    """Every vector selector of a PromQL expression, each as matchers (the name as `__name__`)."""
    text = query
    found: list[tuple[Matcher, ...]] = []
    spans: list[tuple[int, int]] = []
    for match in _SELECTOR.finditer(text):
        name, body = match.group(1), match.group(2)
        matchers = parse_matchers(body)
        if name and name not in _PROMQL_WORDS:
            matchers = (Matcher("__name__", "=", name), *matchers)
        found.append(matchers)
        spans.append(match.span())
    rest = "".join(" " if any(a <= i < b for a, b in spans) else ch for i, ch in enumerate(text))
    rest = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", rest)
    rest = re.sub(r"\[[^\]]*\]", " ", re.sub(_STRING, " ", rest))
    for match in re.finditer(rf"({_IDENT})(\s*\()?", rest):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in _PROMQL_WORDS or re.fullmatch(r"\d.*", name):
            continue
        found.append((Matcher("__name__", "=", name),))
    if not found:
        raise ToolArgError(f"no metric selector found in {query!r}")
    return tuple(found)


def series_selected(labels: Mapping[str, str], selectors: tuple[tuple[Matcher, ...], ...]) -> bool:
    return any(all(m.matches(labels) for m in sel) for sel in selectors)
