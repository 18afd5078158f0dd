"""The table of contents of the HTTP API: every route, by concept.

Writes go through one endpoint (``POST /v1/commands``), and a harness's hooks
(``POST /v1/hooks/{harness}``) through the same service; everything else reads.
"""

from __future__ import annotations

from typing import Any

from eventcoord.api.routes import (
    commands,
    events,
    files,
    health,
    hooks,
    issues,
    messages,
    named_leases,
    queue,
    sessions,
    waits,
)
from eventcoord.ui import routes as ui

ROUTES: list[Any] = [
    commands.post_command,  # POST /v1/commands: every write
    hooks.post_hook,  # POST /v1/hooks/{harness}: a harness's hook (writes through the same service)
    hooks.get_hook_session,  # GET /v1/hooks/{harness}/session: the session a harness's session is bound to
    health.health,  # GET /health
    health.prometheus_metrics,  # GET /metrics
    events.list_events,  # GET /v1/events
    events.stream_events,  # GET /v1/events/stream (SSE)
    sessions.list_agents,  # GET /v1/agents
    sessions.get_agent,  # GET /v1/agents/{session_id}
    issues.issue_state,  # GET /v1/issues/{issue}/state
    issues.list_leases,  # GET /v1/leases
    files.list_file_claims,  # GET /v1/file-claims
    files.list_conflicts,  # GET /v1/conflicts
    files.heatmap,  # GET /v1/heatmap
    messages.list_messages,  # GET /v1/messages
    queue.list_queue,  # GET /v1/queue
    named_leases.list_named_leases,  # GET /v1/named-leases
    waits.list_waits,  # GET /v1/waits
    *ui.ROUTES,  # GET /ui, /ui/{path}: the dashboard
]
