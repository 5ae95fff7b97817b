"""The compaction library: write-time digests of tool results within a token budget (invariants 6, 7, 8).

Pure: no Kafka, no faust, no service (import-linter holds it). The API: `registry.compact_tool_result(tool,
raw, alert_context, *, budget, selector, recorded_selection, config) -> CompactOutcome`, `RawFormatError`,
`BudgetExceeded`. `config` holds the compactors, plugins, tool map, budgets and `COMPACTOR_VERSION` as one
immutable `CompactorConfig` (`load_config()` once at start-up). Selectors (`selector`) return candidate
ids only. One pure compactor per tool: `loki`, `prometheus`, `tempo`, `pod_events`, `passthrough`.
The stream service that runs it over incident.events is `services/compactor/`; `rederive`, the
stand-ins and the benchmarks import this library, never that service.
"""
