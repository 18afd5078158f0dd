"""Prometheus metrics: commands by type and outcome, decision latency, log head, relay lag."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

REGISTRY = CollectorRegistry()

COMMANDS = Counter(
    "eventcoord_commands_total",
    "Commands answered, by type and outcome (ok or the stable error code).",
    ["type", "outcome"],
    registry=REGISTRY,
)
COMMAND_SECONDS = Histogram(
    "eventcoord_command_seconds",
    "Time from decoded command to committed answer.",
    ["type"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)
EVENTS = Counter("eventcoord_events_appended_total", "Events appended by this process.", registry=REGISTRY)
HEAD = Gauge("eventcoord_log_head", "The newest committed position this process has seen.", registry=REGISTRY)
RATE_LIMITED = Counter(
    "eventcoord_rate_limited_total",
    "Requests refused 429 RATE_LIMITED, by the limit that refused them (address, token, auth_failures).",
    ["scope"],
    registry=REGISTRY,
)
SSE_STREAMS = Gauge("eventcoord_sse_streams", "Server-Sent Events streams open on this process.", registry=REGISTRY)
GC_FROZEN = Gauge(
    "eventcoord_gc_frozen_objects",
    "Objects alive once the service started, kept out of the cyclic collector's full passes (gc.freeze).",
    registry=REGISTRY,
)
RELAY_LAG = Gauge("eventcoord_relay_lag", "Positions committed but not yet published to NATS.", registry=REGISTRY)


_children: dict[tuple[str, str], tuple[Any, Any]] = {}


def observe_command(kind: str, outcome: str, seconds: float) -> None:
    """Count one answered command and its latency (label children resolved once)."""
    pair = _children.get((kind, outcome))
    if pair is None:
        pair = _children[(kind, outcome)] = (COMMANDS.labels(kind, outcome), COMMAND_SECONDS.labels(kind))
    pair[0].inc()
    pair[1].observe(seconds)


def render() -> bytes:
    """The exposition text of every metric."""
    return generate_latest(REGISTRY)
