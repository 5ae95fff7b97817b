"""query_tempo: a trace in OTLP JSON -> totals, critical path, span groups.

How it groups spans and finds the critical path: docs/compaction.md, "Tempo". The modules follow
those steps: `parse` (spans, the tree, the critical path), `render`, `groups`, `path`, `headers`, and
`draft`, the compactor itself.
"""

from services.compaction.tempo.draft import draft
from services.compaction.tempo.parse import TOOL

__all__ = ["TOOL", "draft"]
