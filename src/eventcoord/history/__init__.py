"""History (docs/protocol.md#history): snapshots of the read models, point-in-time reads, export, replay,
checked rebuilds and archives.

Nothing here runs on the command path: snapshots are taken by a background worker
(:mod:`.worker`) from the log itself, and a point-in-time read (:mod:`.asof`) rebuilds the
read models at that moment in a scratch in-memory SQLite database, in a thread, with the
same projection functions the commands use (``eventcoord.projections``).
"""
