"""Deterministic seed data: raw tool results in the real systems' formats, and the seed incident.

- `seed_incident() -> SeedIncident`: checkout-api OOMKilled three times on 2026-03-14 —
  the Alertmanager v4 webhook (`alertmanager_webhook`), the four raws (`loki`, `prometheus`,
  `pod_events`, `tempo`; `raw_for(tool)`), the humans' messages (`humans`: four while the bot
  is silent, then a mention), `alert_context()` and the `facts` the compacts must keep.
- Generators with knobs, seeded and byte-stable: `generate_loki(seed, lines=, patterns=,
  streams=)`, `generate_prometheus(seed, series=, points=)`, `generate_tempo(seed, spans=,
  errors=)`, `generate_events(seed, events=, pods=)`, plus the format builders
  `loki_response`, `prometheus_response`, `tempo_response`, `event_list`.

Every timestamp is on 2026-03-14 (UTC). Nothing here reads a clock or global randomness.
"""

from deploy.local.seed.generators import (
    event_list,
    generate_events,
    generate_loki,
    generate_prometheus,
    generate_tempo,
    loki_response,
    prometheus_response,
    tempo_response,
)
from deploy.local.seed.incident import (
    SEED_RECORDING,
    SeedHumanMessage,
    SeedIncident,
    seed_incident,
    seed_recording,
    use_seed_recording,
)

__all__ = [
    "SEED_RECORDING",
    "SeedHumanMessage",
    "SeedIncident",
    "event_list",
    "generate_events",
    "generate_loki",
    "generate_prometheus",
    "generate_tempo",
    "loki_response",
    "prometheus_response",
    "seed_incident",
    "seed_recording",
    "tempo_response",
    "use_seed_recording",
]
