"""Write-time compaction of tool results within a token budget (invariants 6, 7, 8).

The API other services use lives in `registry`: `compact_tool_result(tool, raw, alert_context,
*, budget, selector, recorded_selection, config) -> CompactOutcome`, `RawFormatError`,
`BudgetExceeded`. `config` holds the compactors, plugins, tool map, budgets and `COMPACTOR_VERSION`
as one immutable `CompactorConfig` (`load_config()` once at start-up). Selectors
(`selector`) return candidate ids only. One pure compactor per tool: `loki`, `prometheus`,
`tempo`, `pod_events`, `passthrough`. `cli` is `incident-memory compact`; the faust-streaming
worker is `app` / `stream` / `worker`.
"""
