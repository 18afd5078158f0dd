"""The SQLite event store: one writer on the event loop with group commit."""
