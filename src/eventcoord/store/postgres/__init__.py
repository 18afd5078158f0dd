"""The PostgreSQL event store: per-replica writers with group commit, and what its batches
read, lock and write ahead of their commands."""
