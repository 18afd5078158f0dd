"""What each command and read is for, and what each refusal means and what to do next.

Written for the reader who must act on it (a coding agent choosing its next step, a person
at a shell); the MCP tool descriptions, the CLI help and the client's docstrings use it.
"""

from __future__ import annotations

#: One operation's purpose: when to call it and what it answers.
SUMMARY: dict[str, str] = {
    "register_agent": "Start a session before anything else: announce yourself (actor, host, kind) and get a "
    "session_id. Keep it alive with heartbeat_agent (the MCP server does it for you); end it with end_agent.",
    "heartbeat_agent": "Say you are still alive (send one at least every ttl_seconds/3). working_on declares "
    "the issue you are on (null clears it); handoff_note records where you are for whoever comes next.",
    "end_agent": "End your session when you stop: releases every lease, file claim, queue item and named "
    "lease you hold; handoff_note is stored on each released issue for the next holder.",
    "configure_project": "(admin) Set a project's WIP limit (how many of its issues may be leased at once), "
    "its lock_delay_seconds (a pause after a lease is taken over or expires) and agent_wip_limit (how many "
    "one session may hold).",
    "issue_token": "(admin) Create a bearer token of a role (admin, human, agent, reader); shown once.",
    "revoke_token": "(admin) Revoke a token by its token_id (issue_token answered it): every server refuses "
    "it within a second. Revoking a revoked token changes nothing.",
    "claim_issue": "Take the lease on an issue before working on it; the answer's fencing_token proves your "
    "hold (pass it to verify_hold before you publish). A reclaim of a dead holder's lease hands you its "
    "handoff note in reclaimed_from. force (human/admin) supersedes a live holder. wait: true queues you "
    "in the issue's FIFO line when a live session holds it: the refusal says your place "
    "(details.waiting), and when the issue frees you are granted it automatically and told on your "
    "channel agent:<session_id>. Wait when this issue is the one you must do next and the line is "
    "short; otherwise pick other work (the issue stays held, waiting blocks nobody else).",
    "release_issue": "Give an issue's lease back (reason completed when the work is done, else released).",
    "claim_files": "Reserve the paths (files, directories like src/, globs like src/**/*.py) you will edit "
    "for an issue, all or nothing, before editing them. wait: true queues the whole claim when live "
    "holders block it: it is granted as soon as no live claim overlaps, and you are told on agent:<session_id>.",
    "release_files": "Release file claims of an issue (the named paths, or all of them).",
    "post_message": "Post a message to a channel: issue:<key>, agent:<session_id> or project:<key>.",
    "verify_hold": "The publish gate: call it right before you push or publish the work of an issue, with "
    "your fencing_token. ok means go ahead; a refusal means stop.",
    "enqueue_work": "Put a work item on a project's queue (priority: higher first).",
    "claim_next_work": "Take the next free work item of a project (with its issue's lease); item is null when "
    "nothing is free.",
    "start_work": "Mark a claimed work item as running.",
    "finish_work": "Finish a work item with an outcome (done, failed, oom_killed, cancelled); releases its lease.",
    "acquire_lease": "Acquire a named lease for ttl_seconds: leader election (one dispatcher at a time) or, "
    "with capacity N (fixed by the first acquire), one of N slots (build slots, GPUs, test databases), each "
    "with its own fencing_token. wait: true queues you for the next free slot; you are told on "
    "agent:<session_id> when it is yours.",
    "cancel_wait": "Leave a waiting line you joined with wait: true (issue; issue with paths; or name). Do it "
    "as soon as you decide to do other work, so the line does not hand you something you no longer want.",
    "renew_lease": "Extend a named lease you hold before it expires.",
    "release_lease": "Release a named lease you hold.",
    "list_agents": "List sessions with their liveness (live: only live ones).",
    "get_agent": "One session: what it worked on, its leases, work items and named leases.",
    "list_leases": "List the unreleased issue leases with their holders and liveness.",
    "get_issue_state": "Ask who holds an issue before choosing it: free, self_is_holder, held, reclaimable "
    "or human_held, as seen by the session in 'as'.",
    "list_file_claims": "List the unreleased file claims (who reserved which paths for which issue).",
    "list_conflicts": "The conflict log: every contended path, refused or forced.",
    "get_code_heatmap": "Where work (mode claims) or collisions (mode contention) concentrate, per path prefix.",
    "list_queue": "The work queue with each item's history.",
    "list_named_leases": "The named leases, one row per held slot: who holds it (session_id, actor_key), its "
    "fencing_token, expires_at, whether it is held now, and the name's capacity (how many slots it has).",
    "list_waits": "The waiting lines (FIFO): who waits for which issue, path pattern or named lease, at which "
    "place (1 = next) and since when. Read it before passing wait: true, and to see your place while waiting. "
    "Wait when the thing is what you must do next and few are ahead of you; pick other work when the line is "
    "long, when something else is free, or when you hold what someone in the line needs. Waiting ties up "
    "nothing, but you wait in one line at a time: cancel_wait when you take other work.",
    "read_messages": "Read a channel's messages in order (after: a position cursor). Read your own "
    "agent:<session_id> channel for notices such as a file claim taken from you.",
    "read_events": "Read the event log in position order (after: the last position you saw).",
}

#: What a refusal code means and what the caller should do next.
REFUSAL: dict[str, str] = {
    "VALIDATION": "an argument is invalid (details.field names it): fix it and call again",
    "IDEMPOTENCY_MISMATCH": "this command_id was used for a different command: use a new command_id",
    "UNAUTHENTICATED": "the token is missing or unknown: configure a valid token",
    "FORBIDDEN": "your role may not do this, or the session belongs to another token: ask a human",
    "NOT_FOUND": "no such session, item or channel here: check the id (register_agent first if you have none)",
    "SESSION_NOT_LIVE": "your session ended or went stale: register_agent again (or heartbeat_agent if it is "
    "only stale), then retry",
    "ISSUE_HELD": "another live session holds or is working on this issue (details name it): pick another "
    "issue, or claim again with wait: true to join its line. With details.waiting you are in the line already "
    "(place 1 = next): it is granted to you when it frees and you are told on agent:<session_id>",
    "HUMAN_HELD": "a person holds this issue: do not take it; pick another issue or ask them (with "
    "details.waiting you are in its line and get it when they release it)",
    "WIP_CAP_REACHED": "the project has its maximum of issues in progress: finish or release one of yours, or wait",
    "AGENT_WIP_CAP_REACHED": "you hold as many issues of this project as you may: finish or release one first",
    "FILES_CLAIMED": "another issue holds overlapping paths (details.conflicts name them): do not edit those "
    "paths; pick other work, coordinate by post_message, or claim with wait: true (details.waiting: your place)",
    "NOT_HOLDER": "you do not hold this (item or lease), or are not in that waiting line (cancel_wait): do not "
    "act on it",
    "NOT_FRESH_HOLDER": "you are no longer the holder (superseded or reclaimed): stop, do not push or publish; "
    "read get_issue_state and the issue's messages",
    "INVALID_TRANSITION": "the item is not in a state that allows this step: read list_queue for its status",
    "LEASE_HELD": "another session holds this named lease (every slot of it): do not act as leader; retry after "
    "it expires, or acquire with wait: true to be handed the next free slot (details.waiting: your place)",
    "DEADLOCK": "waiting would close a cycle (details.cycle names who waits for what): do not wait; release "
    "something you hold that the others need, or pick other work",
    "ALREADY_WAITING": "you already wait in another line (one at a time): cancel_wait it first, or keep waiting",
    "CONCURRENCY": "the command lost a race too many times: it is safe to call again",
    "RATE_LIMITED": "too many requests: wait and call again",
    "STORE_UNAVAILABLE": "the database is unreachable: wait and call again",
    "PAYLOAD_TOO_LARGE": "the request is too large: send less",
    "UNSUPPORTED_MEDIA_TYPE": "send the command as a JSON body with Content-Type: application/json",
    "REQUEST_TIMEOUT": "the request arrived too slowly and the connection was closed: send it again",
}

#: The refusals each operation can answer, beyond VALIDATION and the auth codes.
REFUSALS_OF: dict[str, tuple[str, ...]] = {
    "heartbeat_agent": ("SESSION_NOT_LIVE", "NOT_FOUND"),
    "end_agent": ("SESSION_NOT_LIVE", "NOT_FOUND"),
    "revoke_token": ("NOT_FOUND",),
    "claim_issue": (
        "ISSUE_HELD",
        "HUMAN_HELD",
        "WIP_CAP_REACHED",
        "AGENT_WIP_CAP_REACHED",
        "DEADLOCK",
        "ALREADY_WAITING",
        "SESSION_NOT_LIVE",
    ),
    "release_issue": ("NOT_HOLDER", "SESSION_NOT_LIVE"),
    "claim_files": ("FILES_CLAIMED", "DEADLOCK", "ALREADY_WAITING", "SESSION_NOT_LIVE"),
    "post_message": ("NOT_FOUND",),
    "verify_hold": ("NOT_FRESH_HOLDER", "SESSION_NOT_LIVE"),
    "claim_next_work": ("SESSION_NOT_LIVE",),
    "start_work": ("NOT_HOLDER", "INVALID_TRANSITION"),
    "finish_work": ("NOT_HOLDER", "INVALID_TRANSITION"),
    "acquire_lease": ("LEASE_HELD", "DEADLOCK", "ALREADY_WAITING", "SESSION_NOT_LIVE"),
    "cancel_wait": ("NOT_HOLDER", "SESSION_NOT_LIVE"),
    "renew_lease": ("NOT_HOLDER", "SESSION_NOT_LIVE"),
    "release_lease": ("NOT_HOLDER",),
    "get_agent": ("NOT_FOUND",),
}


def describe(name: str) -> str:
    """The full description of an operation: its purpose, then its refusals and what to do."""
    lines = [SUMMARY.get(name, name.replace("_", " "))]
    codes = REFUSALS_OF.get(name, ())
    if codes:
        lines.append("Refusals:")
        lines += [f"- {code}: {REFUSAL[code]}" for code in codes]
    return "\n".join(lines)


#: What a field means, wherever it appears (tool input schemas, CLI option help).
FIELD: dict[str, str] = {
    "session_id": "the session acting (from register_agent)",
    "command_id": "idempotency key: the same id with the same body returns the first answer",
    "actor": "who you are, stable across sessions (e.g. a name); gives a stable identity",
    "runtime": "the agent runtime's name, with runtime_session_id",
    "runtime_session_id": "the runtime's own session id (stored only as a digest)",
    "process_ancestry": "a digest of the parent process and its start time",
    "host": "the machine, for audit",
    "kind": "agent or human (human holds are never reclaimed automatically)",
    "working_on": "the issue you are working on now (null clears it)",
    "handoff_note": "where the work stands, for whoever takes the issue next",
    "project": "project key",
    "issue": "issue key",
    "force": "take it over from a live holder (claim_issue: human/admin only); recorded, the holder is told",
    "reason": "released, or completed when the work is done",
    "paths": "files, directories (src/) or globs (src/**/*.py), relative to the repository root",
    "exclusive": "false: a shared claim that does not conflict with other shared claims",
    "channel": "issue:<key>, agent:<session_id> or project:<key>",
    "body": "message text",
    "fencing_token": "the token claim_issue answered; a stale one is refused",
    "wip_limit": "how many issues of the project may be under a live lease at once",
    "wait": "true: when a live session holds it, join its FIFO line and be granted it when it frees",
    "lock_delay_seconds": "after a lease expires or is superseded, nobody else is granted the issue for this long",
    "agent_wip_limit": "how many live leases of the project one session may hold (none: no limit)",
    "capacity": "how many sessions may hold the named lease at once (fixed by the first acquire)",
    "priority": "higher first",
    "payload": "any JSON, handed to the worker",
    "blocked_by": "issue keys that must be done first",
    "item_id": "work item id (from enqueue_work or claim_next_work)",
    "outcome": "done, failed, oom_killed or cancelled",
    "name": "named lease (e.g. dispatcher)",
    "ttl_seconds": "how long the named lease lasts unless renewed",
    "role": "admin, human, agent or reader",
    "workspace": "the workspace of the new token (operator only for another one)",
    "token_id": "the token_id issue_token answered",
    "live": "true: only live sessions; false: only stale or ended ones",
    "as": "the session asking (its own lease shows as self_is_holder)",
    "session": "only leases of this session",
    "after": "position cursor: only entries after it",
    "limit": "at most this many",
    "since": "RFC 3339 time, inclusive",
    "until": "RFC 3339 time, exclusive",
    "prefix": "only paths at or below this prefix",
    "mode": "claims (where work happens) or contention (where agents collide)",
    "depth": "path segments per bucket",
    "status": "queued, claimed, running, done, failed, oom_killed or cancelled",
}
