"""What real models and servers do badly, played by the OpenAI stand-in (a test tool, not a model).

Two axes, both seen on real endpoints (../shared/RUNTIME-NOTES.md, "Real models over the OpenAI wire"):
- the SERVER's structured-output support (`ServerMode`): `openai` enforces `json_schema` strict;
  `llama-cpp` refuses `json_schema` with a 400 (llama-cpp-python's validation message,
  `Input should be 'text' or 'json_object'`) and enforces `json_object` with a `schema` by grammar;
  `none` accepts any `response_format` and enforces nothing.
- the MODEL's misbehaviour (`Fault`), scripted per node (investigate, hypothesis, judge) and count:
  no tool calls, invalid JSON arguments, an unknown tool name, prose around the JSON, unquoted keys,
  HTML entities for quotes, no JSON at all, output cut at max_tokens, and a 429 or a 500 from the server.
A content fault spoils only what the server does not enforce: an enforcing server's answer is valid
(a grammar or strict schema cannot emit unquoted keys), except a cut at max_tokens, which no
enforcement prevents.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

ServerMode = Literal["openai", "llama-cpp", "none"]
SERVER_MODES: tuple[ServerMode, ...] = ("openai", "llama-cpp", "none")
Fault = Literal[
    "no_tool_calls",
    "invalid_tool_args",
    "unknown_tool",
    "prose_around_json",
    "unquoted_keys",
    "html_entities",
    "no_json",
    "truncated",
    "status_429",
    "status_500",
]
CONTENT_FAULTS = frozenset({"prose_around_json", "unquoted_keys", "html_entities", "no_json"})
LLAMA_CPP_REFUSAL = "Input should be 'text' or 'json_object'"
_TASK = re.compile(r"^TASK: (\w+)", re.M)
_KEY = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)":')


@dataclass
class Role:
    """Spoil the next `times` answers for `node` (None: any node) with `fault`; -1: every one."""

    fault: Fault
    node: str | None = None
    times: int = 1


@dataclass
class Script:
    roles: list[Role] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, fault: Fault, node: str | None = None, times: int = 1) -> None:
        with self._lock:
            self.roles.append(Role(fault, node, times))

    def take(self, node: str) -> Fault | None:
        """The fault to play on this call (consumed), or None."""
        with self._lock:
            for role in self.roles:
                if role.times != 0 and role.node in (None, node):
                    role.times -= 1 if role.times > 0 else 0
                    return role.fault
        return None


def node_of(messages: list[dict[str, Any]]) -> str:
    """Which graph node a request serves, from its system prompt's `TASK:` line."""
    for m in messages:
        if m.get("role") in ("system", "developer") and isinstance(m.get("content"), str):
            found = _TASK.search(m["content"])
            if found:
                return found.group(1)
    return "other"


def enforced(mode: ServerMode, fmt: dict[str, Any] | None) -> bool:
    """Does this server hold the answer to valid JSON for this request's response_format?"""
    kind = (fmt or {}).get("type")
    if mode == "openai":
        return kind in ("json_schema", "json_object")
    if mode == "llama-cpp":
        return kind == "json_object"
    return False


def spoil_content(fault: Fault, content: str) -> str:
    """The answer as a model that ignores the format writes it."""
    if fault == "prose_around_json":
        return f"Sure! Here is the answer:\n```json\n{content}\n```\nLet me know if you need more."
    if fault == "unquoted_keys":
        return _KEY.sub(r"\1:", content)
    if fault == "html_entities":
        return content.replace('"', "&#34;")
    if fault == "no_json":
        return "The checkout-api container ran out of memory, I think."
    return content


def truncate(content: str) -> str:
    """Cut where max_tokens would: mid-answer."""
    return content[: max(1, len(content) // 2)]


def spoil_calls(fault: Fault, calls: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """(wire tool calls, content) as a model that calls tools badly sends them."""
    if fault == "no_tool_calls":  # as a 0.5B model did: an evidence id as text, no call
        return [], "1773458070.545498:-:alert:0"
    if fault == "invalid_tool_args":
        return [dict(c, function=dict(c["function"], arguments='{"query": {namespace=')) for c in calls], None
    if fault == "unknown_tool":
        bad = {"name": "run_shell", "arguments": '{"cmd": "kubectl get pods -A"}'}
        return [dict(c, function=bad) for c in calls[:1]] + calls[1:], None
    return calls, None
