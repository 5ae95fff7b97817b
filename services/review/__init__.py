"""The review page: a read-only web view of the projection (`incident-memory review`, docs/review.md)."""
