"""Playbooks: the deterministic first tool calls of an alert's round, chosen by the alert's labels.

Deterministic work first, the model selects: when an alert opens an incident, the playbook that
matches its labels plans its tool calls before any model call, so the evidence an alert of that
kind needs (logs, series, events) is there even when the model never reaches for a tool. The
calls are ordinary tool calls (same ids, ToolPath, compaction, cache, replay); `${label}` in an
argument is filled from the alert's labels (escaped for a quoted LogQL/PromQL matcher value), and
`start`/`end` from the pinned window. A call whose label is missing is skipped, never guessed.

Playbooks are data: `playbooks.yaml` beside this module by default, or `AGENT_PLAYBOOKS=/path.yaml`;
the file is validated at start (`load_playbooks`), with a one-line error naming the problem.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from services.runtime.errors import UserFacingError

PLAYBOOKS_ENV = "AGENT_PLAYBOOKS"
DEFAULT_FILE = Path(__file__).with_name("playbooks.yaml")
WINDOW_ARGS = ("start", "end")


class PlannedCall(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


class Match(BaseModel):
    """All must hold: the alertname is one of `alertname` (when given), and each label fully matches
    its regular expression. An empty match is the fallback."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alertname: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _regexes_compile(cls, value: dict[str, str]) -> dict[str, str]:
        for label, pattern in value.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"label {label!r}: bad regular expression {pattern!r}: {exc}") from None
        return value

    def holds(self, alertname: str, labels: Mapping[str, str]) -> bool:
        if self.alertname and alertname not in self.alertname:
            return False
        return all(re.fullmatch(p, str(labels.get(k, ""))) for k, p in self.labels.items())


class Playbook(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    match: Match = Field(default_factory=Match)
    calls: list[PlannedCall] = Field(min_length=1)


class PlaybookFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    playbooks: list[Playbook] = Field(min_length=1)

    @field_validator("playbooks")
    @classmethod
    def _names_unique(cls, value: list[Playbook]) -> list[Playbook]:
        names = [p.name for p in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"playbook names must be unique: {dupes}")
        return value


def parse_playbooks(text: str, source: str) -> PlaybookFile:
    """Validate a playbook file's text; a UserFacingError in one line otherwise."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserFacingError(f"playbooks {source}: not YAML: {' '.join(str(exc).split())}") from None
    try:
        return PlaybookFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise UserFacingError(f"playbooks {source}: {where}: {first['msg']}") from None


@lru_cache(maxsize=8)
def _load(path: str) -> PlaybookFile:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserFacingError(f"playbooks {path}: cannot read: {exc.strerror}") from None
    return parse_playbooks(text, path)


def load_playbooks(env: Mapping[str, str] | None = None) -> PlaybookFile:
    """The configured playbooks (read and validated once per path)."""
    path = (os.environ if env is None else env).get(PLAYBOOKS_ENV) or str(DEFAULT_FILE)
    return _load(path)


def choose(book: PlaybookFile, alertname: str, labels: Mapping[str, str]) -> Playbook | None:
    """The first playbook whose match holds (file order: specific ones first, the fallback last)."""
    return next((p for p in book.playbooks if p.match.holds(alertname, labels)), None)


def _quoted(value: str) -> str:
    """A label value safe inside a double-quoted LogQL/PromQL matcher."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def _fill(value: Any, labels: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return string.Template(value).substitute({k: _quoted(v) for k, v in labels.items()})
    if isinstance(value, list):
        return [_fill(v, labels) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, labels) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class PlaybookPlan:
    playbook: str
    calls: list[tuple[str, dict[str, Any]]]  # (tool, args), in the playbook's order
    skipped: list[str]  # why each left-out call was left out


def plan_calls(
    playbook: Playbook,
    labels: Mapping[str, str],
    window: tuple[str, str] | None,
    offered: Mapping[str, set[str]],
) -> PlaybookPlan:
    """The playbook's calls for one alert: labels filled in, the pinned window set, unknown tools out.

    `offered` maps each offered tool to its parameter names.
    """
    calls: list[tuple[str, dict[str, Any]]] = []
    skipped: list[str] = []
    for call in playbook.calls:
        if call.tool not in offered:
            skipped.append(f"{call.tool}: not offered")
            continue
        try:
            args = _fill(call.args, labels)
        except (KeyError, ValueError) as exc:
            skipped.append(f"{call.tool}: the alert has no label {exc}")
            continue
        params = offered[call.tool]
        if window is not None and all(a in params for a in WINDOW_ARGS):
            args = {**args, "start": window[0], "end": window[1]}
        calls.append((call.tool, args))
    return PlaybookPlan(playbook.name, calls, skipped)


def offered_params(specs: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Tool name -> its parameter names, from the OpenAI-format tool specs the toolbox offers."""
    out: dict[str, set[str]] = {}
    for spec in specs:
        fn = spec.get("function") or {}
        if isinstance(fn, dict) and fn.get("name"):
            out[str(fn["name"])] = set((fn.get("parameters") or {}).get("properties") or {})
    return out


def alert_labels(alert_row: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """(alertname, labels) of an alert row: the group's common labels over its first alert's, plus
    `service` and `alertname` as the alert event states them."""
    webhook = alert_row.get("alert") if isinstance(alert_row.get("alert"), dict) else {}
    assert isinstance(webhook, dict)
    alerts = webhook.get("alerts") or []
    first = alerts[0].get("labels") or {} if alerts and isinstance(alerts[0], dict) else {}
    labels = {str(k): str(v) for k, v in {**first, **(webhook.get("commonLabels") or {})}.items()}
    alertname = str(alert_row.get("alertname") or labels.get("alertname") or "")
    if alert_row.get("service"):
        labels.setdefault("service", str(alert_row["service"]))
    labels.setdefault("alertname", alertname)
    return alertname, labels
