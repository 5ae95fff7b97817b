"""Where an incident hurts: the troubled nodes and the failing dependencies its evidence names (pure).

Concurrent recall asks whether two open incidents share a cause: the same error patterns, or the same
place, a node that went bad or a dependency both fail to reach. Patterns alone miss the second kind:
two services failing on one dead node, or against one dead database, log different errors. So the
profile keeps the loci the raw names, read strictly so that a locus is a statement of trouble, never
of mere presence:
- a node is troubled when Kubernetes reports an event on the Node object itself (NodeNotReady,
  Rebooted, pressure), or a node alert (an alert about a node, by name) carries its `node`/`instance`;
  a pod merely scheduled there (an event's `source.host`) says nothing by itself, so the nodes the pods ran
  on are kept apart (`pod_event_hosts`): they tie an incident to a node only another incident reports in
  trouble (one asked for node events, the other did not);
- a dependency fails when error-or-worse log lines report connections to it failing (its
  `host:port`, or `host=`/`peer=`/`upstream=`; more than one line, unless it is the only host named), or a client span to it ends in error (its
  `peer.service`, `server.address`, `net.peer.name`, Envoy's `upstream.cluster`); a healthy call
  says nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

MAX_LOCI: Final = 16  # per kind and incident: the most reported first
NODE_PREFIX: Final = "node:"
DEPENDENCY_PREFIX: Final = "dep:"

_CONNECTION: Final = re.compile(
    r"\b(?:dial|connect\w*|refused|unreachable|no route to host|i/o timeout|reset by peer|"
    r"no such host|name resolution|handshake|broken pipe|eof)\b",
    re.I,
)
_HOST_PORT: Final = re.compile(
    r"(?<![\w.:-])((?:\d{1,3}(?:\.\d{1,3}){3})|(?:[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)*)):(\d{2,5})\b", re.I
)
_HOST_FIELD: Final = re.compile(
    r"\b(?:host|peer|upstream|addr|address|server|remote|target)=\"?([a-z0-9][a-z0-9._-]*[a-z0-9])", re.I
)
_URL_SCHEMES: Final = frozenset(
    {"http", "https", "tcp", "udp", "grpc", "postgres", "postgresql", "redis", "amqp"}
)
_PEER_ATTRIBUTES: Final = (
    "peer.service",
    "server.address",
    "net.peer.name",
    "db.instance",
    "http.host",
    "upstream.cluster",  # Envoy's name for the service a proxied call went to
)
_CLIENT_KINDS: Final = frozenset({3, "3", "SPAN_KIND_CLIENT", 5, "5", "SPAN_KIND_PRODUCER"})
_ERROR_STATUS: Final = frozenset({2, "2", "STATUS_CODE_ERROR"})


def ranked(counts: Mapping[str, int]) -> list[str]:
    """The loci most reported first (ties by name), at most MAX_LOCI."""
    return [k for k, _n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][:MAX_LOCI]


def _count(names: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in names:
        clean = name.strip().lower().rstrip(".")
        if clean:
            counts[clean] = counts.get(clean, 0) + 1
    return counts


def line_dependencies(line: str) -> list[str]:
    """The hosts an error line says a connection to failed (`host:port`, `host=...`), without ports."""
    if _CONNECTION.search(line) is None:
        return []
    found = [h for h, _port in _HOST_PORT.findall(line) if h.lower() not in _URL_SCHEMES]
    return list(dict.fromkeys(h.lower() for h in found + _HOST_FIELD.findall(line)))  # once per line


def log_dependencies(error_lines: Iterable[str]) -> dict[str, int]:
    """Failing dependencies of a log answer's error lines, with how many lines name each: the hosts named by
    more than one line, or the one host named when there is only one. A scatter of hosts each named once is
    not a place in trouble: a server logs a `connection reset by peer` for every client that hangs up, each
    from another address; a dependency that is down fails every call to it."""
    counts = _count(h for line in error_lines for h in line_dependencies(line))
    repeated = {host: n for host, n in counts.items() if n > 1}
    return repeated if repeated or len(counts) != 1 else counts


def is_node_event(item: Mapping[str, Any]) -> bool:
    obj = item.get("involvedObject")
    return isinstance(obj, dict) and obj.get("kind") == "Node" and isinstance(obj.get("name"), str)


def pod_event_nodes(raw: Any) -> dict[str, int]:
    """Nodes a Kubernetes EventList reports trouble on: events whose object is the Node itself."""
    items = raw.get("items") if isinstance(raw, dict) else None
    found = [i for i in items if isinstance(i, dict) and is_node_event(i)] if isinstance(items, list) else []
    return _count(i["involvedObject"]["name"] for i in found)


def pod_event_hosts(raw: Any) -> dict[str, int]:
    """Nodes the pods of a Kubernetes EventList ran on: `source.host` of its Warning events on other objects than
    a Node (the kubelet's). Not trouble by itself: a pod merely scheduled somewhere says nothing, until another
    incident reports that node in trouble (`schemas/recall_scoring.shared_locus`)."""
    items = raw.get("items") if isinstance(raw, dict) else None
    found = [
        i["source"]["host"]
        for i in (items if isinstance(items, list) else [])
        if isinstance(i, dict) and not is_node_event(i) and i.get("type", "Warning") == "Warning"
        and isinstance(i.get("source"), dict) and isinstance(i["source"].get("host"), str)
    ]  # fmt: skip
    return _count(found)


def alert_nodes(alertname: str, labels: Mapping[str, Any]) -> list[str]:
    """The node an alert about a node names (`node`, or `instance` without its port); none for other alerts,
    whose `node` label says only where a pod ran."""
    if "node" not in alertname.lower():
        return []
    named = [labels.get("node"), str(labels.get("instance") or "").rsplit(":", 1)[0] or None]
    return ranked(_count(str(n) for n in named if n))


def trace_dependencies(raw: Any) -> dict[str, int]:
    """Peers of the client spans of an OTLP trace (Tempo's `batches` or `resourceSpans`) that ended in error."""
    return _count(_peer(span) for span in _spans(raw) if _failed_client(span) and _peer(span))


def _spans(raw: Any) -> Iterator[dict[str, Any]]:
    batches = (raw.get("batches") or raw.get("resourceSpans") or []) if isinstance(raw, dict) else []
    for batch in batches if isinstance(batches, list) else []:
        scopes = batch.get("scopeSpans") or batch.get("instrumentationLibrarySpans") or []
        for scope in scopes if isinstance(scopes, list) else []:
            spans = scope.get("spans") if isinstance(scope, dict) else None
            yield from (s for s in spans if isinstance(s, dict)) if isinstance(spans, list) else ()


def _failed_client(span: Mapping[str, Any]) -> bool:
    status = span.get("status")
    code = status.get("code") if isinstance(status, dict) else None
    return span.get("kind") in _CLIENT_KINDS and code in _ERROR_STATUS


def _peer(span: Mapping[str, Any]) -> str:
    attributes = {
        a.get("key"): (a.get("value") or {}).get("stringValue")
        for a in span.get("attributes") or []
        if isinstance(a, dict) and isinstance(a.get("value"), dict)
    }
    return next((str(attributes[k]) for k in _PEER_ATTRIBUTES if attributes.get(k)), "")
