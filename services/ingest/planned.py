"""What a request turns into: events, each bound for the events or the wake topic."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

from schemas.events import EventBase
from schemas.strict_json import StrictJsonError, loads_strict
from services.ingest.rejections import Rejected, bad, missing

Destination = Literal["events", "wake"]

SLACK_TS = re.compile(r"^[0-9]{1,12}\.[0-9]{1,9}$")


class Planned(NamedTuple):
    destination: Destination
    event: EventBase


# Slack's and Alertmanager's bodies are a few levels deep; the events that carry them add a few more,
# and the serializer stops at a depth far below the decoder's default.
MAX_BODY_DEPTH = 64


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or a 400 saying why not: the one strict rule of every edge
    (schemas.strict_json: UTF-8 only, no NaN/Infinity or overflowing numbers, no lone surrogates,
    bounded integers and depth), so what is stored is what came, and nothing breaks further in."""
    try:
        decoded = loads_strict(body, max_depth=MAX_BODY_DEPTH)
    except StrictJsonError as exc:
        raise Rejected(400, "malformed_json", str(exc)[:200]) from None
    if not isinstance(decoded, dict):
        raise Rejected(400, "malformed_json", f"expected a JSON object, got {type(decoded).__name__}")
    return decoded


def get_str(obj: dict[str, Any], key: str, where: str, required: bool = True) -> str | None:
    """A string field, None when absent and optional; a 400 when absent and required or not a string."""
    value = obj.get(key)
    if value is None:
        if required:
            raise missing(f"{where}{key}")
        return None
    if not isinstance(value, str):
        raise bad(f"{where}{key}", f"expected a string, got {type(value).__name__}")
    return value


def get_dict(obj: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = obj.get(key)
    if value is None:
        raise missing(f"{where}{key}")
    if not isinstance(value, dict):
        raise bad(f"{where}{key}", f"expected an object, got {type(value).__name__}")
    return value


def slack_ts(obj: dict[str, Any], key: str, where: str, required: bool = True) -> str | None:
    """A Slack timestamp (`<seconds>.<micros>`), validated: it becomes part of every message id."""
    value = get_str(obj, key, where, required)
    if value is not None and not SLACK_TS.match(value):
        raise bad(f"{where}{key}", f"not a Slack ts: {value[:40]!r}")
    return value


def ts_to_datetime(ts: str) -> datetime:
    """A Slack ts as an aware UTC datetime, exact to the microsecond (no float rounding)."""
    seconds, _, fraction = ts.partition(".")
    micros = int((fraction + "000000")[:6])
    return datetime.fromtimestamp(int(seconds), UTC).replace(microsecond=micros)
