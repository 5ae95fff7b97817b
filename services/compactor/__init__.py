"""The compactor stream service: a faust-streaming worker that compacts every `ToolResult` on
incident.events with the compaction library (`services/compaction/`) and emits it on incident.compacted.

`app` is `incident-memory compactor` (config, wiring, loop), `stream` the pure per-record decision,
`worker` the faust app, `cli` is `incident-memory compact` over the library.
"""
