"""What a model call is sent, rendered from a thread's rows: pure functions below the services.

The agent builds every model input with these functions and the review page rebuilds the same
inputs with them, so the page shows what was sent, not a copy that could drift.
"""
