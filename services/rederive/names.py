"""One re-derivation's name, and every resource named after it.

A NAME is a plain lower-case Postgres identifier, so it is also safe inside topic and group names.
Everything a run creates is derived from it, so rerunning the same command finds the same topics,
consumer groups and schema again (resume), and `--switch NAME` can find what to check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas import projections, topics
from services.runtime.errors import BadInput

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
DEFAULT_VIEWS_SCHEMA = projections.DEFAULT_VIEWS_SCHEMA
# Names a re-derivation may not take: the default projection, the readers' views, Postgres' own.
RESERVED = frozenset({"public", "previous", "information_schema", DEFAULT_VIEWS_SCHEMA})

COMPACTOR_APP_PREFIX = "incident-memory-compactor-rederive-"
PROJECTOR_GROUP_PREFIX = "incident-memory-projector-rederive-"


def check_name(name: str, *, what: str = "NAME") -> str:
    """The name if usable; BadInput (exit 2, one line) naming the rule otherwise."""
    if not NAME_RE.match(name):
        raise BadInput(
            f"{what} {name!r} is not a valid name: use 1-40 lower-case letters, digits or '_', "
            "starting with a letter"
        )
    if name in RESERVED or name.startswith("pg_"):
        raise BadInput(f"{what} {name!r} is reserved; choose another name")
    return name


@dataclass(frozen=True)
class Names:
    """Every resource of the re-derivation NAME: its own schema, and its own copy of each shared
    topic and consumer group, named `<shared name><separator>NAME` (built once, by `names_for`)."""

    name: str
    events_topic: str
    schema: str
    app_id: str  # the compactor's faust app id, i.e. its consumer group on the events topic
    compacted_topic: str
    dlq_topic: str
    projector_group: str


def names_for(name: str, events_topic: str = topics.EVENTS) -> Names:
    """The names of the re-derivation `name` (checked: BadInput names the rule it breaks)."""
    name = check_name(name)
    return Names(
        name=name,
        events_topic=events_topic,
        schema=name,
        app_id=f"{COMPACTOR_APP_PREFIX}{name}",
        compacted_topic=f"{topics.COMPACTED}.{name}",
        dlq_topic=f"{topics.DLQ}.{name}",
        projector_group=f"{PROJECTOR_GROUP_PREFIX}{name}",
    )
