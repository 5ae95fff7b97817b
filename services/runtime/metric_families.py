"""The one way a service declares its Prometheus metric families: on one registry, one call a family,
with the values of its closed label sets at 0 from the start.

Why at 0: a series born at 1 shows no increase() or rate(), so the first dead-lettered round or failed
post would never fire its alert (tests/test_metrics_initialised.py). Why a registry per `Families`: a
service that can run several times in one process (the tests) gives each run a registry of its own;
module-level metrics use prometheus_client's default one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

LabelValues = str | Sequence[str]
"""One label set's values: a string for a family with one label, else one value per label, in order."""

_Family = TypeVar("_Family", Counter, Gauge, Histogram)


class Families:
    """Declares metric families on `registry`; each declaration returns prometheus_client's family."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry

    def counter(
        self, name: str, documentation: str, *labels: str, zero: Iterable[LabelValues] = ()
    ) -> Counter:
        return _at_zero(Counter(name, documentation, labels, registry=self.registry), zero)

    def gauge(self, name: str, documentation: str, *labels: str) -> Gauge:
        return Gauge(name, documentation, labels, registry=self.registry)

    def histogram(
        self,
        name: str,
        documentation: str,
        *labels: str,
        buckets: Sequence[float],
        zero: Iterable[LabelValues] = (),
    ) -> Histogram:
        family = Histogram(name, documentation, labels, buckets=buckets, registry=self.registry)
        return _at_zero(family, zero)


def _at_zero(family: _Family, zero: Iterable[LabelValues]) -> _Family:
    """Create the child of every label set in `zero`, in order (their order on /metrics)."""
    for values in zero:
        family.labels(*((values,) if isinstance(values, str) else values))
    return family
