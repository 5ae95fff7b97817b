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
    """Every resource of the re-derivation NAME."""

    name: str
    events_topic: str = topics.EVENTS

    @property
    def schema(self) -> str:
        return self.name

    @property
    def app_id(self) -> str:
        """The compactor's faust app id, i.e. its consumer group on the events topic."""
        return f"{COMPACTOR_APP_PREFIX}{self.name}"

    @property
    def compacted_topic(self) -> str:
        return f"{topics.COMPACTED}.{self.name}"

    @property
    def dlq_topic(self) -> str:
        return f"{topics.DLQ}.{self.name}"

    @property
    def projector_group(self) -> str:
        return f"{PROJECTOR_GROUP_PREFIX}{self.name}"


def names_for(name: str, events_topic: str = topics.EVENTS) -> Names:
    return Names(check_name(name), events_topic)
