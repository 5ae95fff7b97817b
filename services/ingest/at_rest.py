"""Redaction at ingest, for teams that want no secret at rest (`--redact-at-ingest`; off by default).

By default the raw on `incident.events` and in `agent_messages.content` stays verbatim: it is the
audit trail, in the team's own Kafka and Postgres, and only what leaves for a model or Slack is
redacted (by the compactor, at write time). With this option the human message's text and the
alert's payload are redacted before they are produced, so no credential from Slack or Alertmanager
is ever written anywhere; the cost is that the audit trail no longer holds it either. Tool results
are produced by the agent, not here: their raws stay as the back end answered (docs/redaction.md).
"""

from __future__ import annotations

from schemas.events import AlertReceived, EventBase, HumanMessage
from services.boundary.redact import redact_text, redact_value


def redact_at_rest(event: EventBase) -> EventBase:
    """The event as it may rest: a human message's text and an alert's payload redacted."""
    if isinstance(event, HumanMessage):
        text = redact_text(event.text)
        return event if text == event.text else event.model_copy(update={"text": text})
    if isinstance(event, AlertReceived):
        alert = redact_value(event.alert)
        return event if alert == event.alert else event.model_copy(update={"alert": alert})
    return event
