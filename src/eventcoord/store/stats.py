"""How the stores' writers batch: Prometheus counters beside the service's own metrics.

The average batch is ``commands / batches``; ``again`` counts commands a PostgreSQL batch
handed to the next (a lost race, a lock wait cut short, a requeue), ``lost_races`` the races
among them, ``rollbacks`` fast passes rolled back, ``chained`` COMMITs that began the next
batch; ``reads_ahead``/``reads_ahead_served`` the reads ahead and those that served;
``cpu_pressure`` the event loop's wait for a CPU per second it runs. The SQLite store shows
its write-ahead log: its length at the last checkpoint, and the checkpoints that held the writer.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from eventcoord.metrics import REGISTRY

BATCHES = Counter(
    "eventcoord_store_batches_total", "Write transactions the store's writer committed or tried.", registry=REGISTRY
)
COMMANDS = Counter(
    "eventcoord_store_batched_total", "Commands run inside those transactions (re-runs included).", registry=REGISTRY
)
ROLLBACKS = Counter(
    "eventcoord_store_batch_rollbacks_total",
    "Batches whose first pass was rolled back and run again with savepoints.",
    registry=REGISTRY,
)
AGAIN = Counter(
    "eventcoord_store_again_total", "Commands decided again in a later batch (PostgreSQL).", registry=REGISTRY
)
LOST_RACES = Counter(
    "eventcoord_store_lost_races_total", "Races lost inside the database (PostgreSQL).", registry=REGISTRY
)
CHAINED = Counter(
    "eventcoord_store_chained_total",
    "Batches whose COMMIT also began the next batch's transaction (PostgreSQL, commands waiting).",
    registry=REGISTRY,
)
READS_AHEAD = Counter(
    "eventcoord_store_reads_ahead_total",
    "Commands whose first reads a PostgreSQL batch read ahead with others' (rows_ahead).",
    registry=REGISTRY,
)
READS_AHEAD_SERVED = Counter(
    "eventcoord_store_reads_ahead_served_total",
    "Of those, the reads that served their command (the others were forgotten: the batch wrote what they read).",
    registry=REGISTRY,
)
CPU_PRESSURE = Gauge(
    "eventcoord_store_cpu_pressure",
    "Seconds the event loop's thread waited for a CPU per second it ran, averaged over about a second, "
    "as a PostgreSQL writer last read it under load (from 0.4 it gathers fuller batches).",
    registry=REGISTRY,
)
WAL_FRAMES = Gauge(
    "eventcoord_sqlite_wal_frames",
    "Frames (pages) in SQLite's write-ahead log at the last checkpoint.",
    registry=REGISTRY,
)
WAL_FINISHED = Counter(
    "eventcoord_sqlite_wal_finished_total",
    "Checkpoints that held the writer to copy the log to its end, so that it starts over (SQLite).",
    registry=REGISTRY,
)
WAL_HOLD_SECONDS = Histogram(
    "eventcoord_sqlite_wal_hold_seconds",
    "How long such a checkpoint held the writer's next batch (SQLite).",
    buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0),
    registry=REGISTRY,
)
