"""query_prometheus: a range-query matrix -> one line per active series, quiet series in groups.

How it reads a series (statistics, spikes, salience, trend segments), renders it and groups the
quiet ones: docs/compaction.md, "Prometheus". The modules follow those steps: `parse`, `stats`,
`salience`, `segments`, `render`, `groups`, and `draft`, the compactor itself.
"""

from services.compaction.prometheus.draft import draft
from services.compaction.prometheus.parse import TOOL

__all__ = ["TOOL", "draft"]
