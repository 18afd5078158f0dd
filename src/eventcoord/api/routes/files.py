"""Routes of file claims: live claims, the conflict log, the heatmap.

Each route authenticates, validates its query (422 VALIDATION naming the field) and runs
one query of :mod:`eventcoord.api.queries.files`.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import Parameter

from eventcoord import errors
from eventcoord.api.deps import caller, json, runtime
from eventcoord.api.queries.files import (
    LIVE_CLAIMS_TABLES,
    HeatmapMode,
    conflict_log,
    heatmap_buckets,
    live_claims,
)
from eventcoord.codec import parse_time
from eventcoord.domain.paths import PathError, normalise_path

Req = Request[Any, Any, Any]


def parse_window(since: str | None, until: str | None) -> tuple[int | None, int | None]:
    """RFC 3339 ``since``/``until`` to microseconds; a bad one is 422 naming it."""
    out: list[int | None] = []
    for name, value in (("since", since), ("until", until)):
        if value is None or value == "":
            out.append(None)
            continue
        try:
            out.append(parse_time(value))
        except (ValueError, OverflowError):
            raise errors.invalid(name, f"{name} must be an RFC 3339 time, got {value!r}") from None
    return out[0], out[1]


def parse_prefix(value: str | None) -> str:
    """A path prefix, normalised; ``''`` means everything. Trailing ``/`` is optional."""
    if value is None or value.strip("/") == "":
        return ""
    try:
        return normalise_path(value).rstrip("/")
    except PathError as e:
        raise errors.invalid("prefix", f"prefix: {e}", e.reason) from None


@get("/v1/file-claims", operation_id="listFileClaims", summary="Unreleased file claims")
async def list_file_claims(
    request: Req,
    issue: Annotated[str | None, Parameter(description="only claims of this issue")] = None,
    session_id: Annotated[str | None, Parameter(description="only claims held by this session")] = None,
    session: Annotated[str | None, Parameter(description="alias of session_id")] = None,
    prefix: Annotated[str | None, Parameter(description="only paths at or below this prefix")] = None,
    limit: Annotated[int, Parameter(ge=1, le=10000)] = 1000,
    as_of: Annotated[
        str | None, Parameter(description="As of a position or an RFC 3339 time (docs/protocol.md#history)")
    ] = None,
) -> Response[bytes]:
    """``{"file_claims": [...]}``: unreleased claims of the workspace, oldest first.

    ``live`` is computed at read time; a claim without a session is always ``live`` (it
    never expires and yields only to force).
    """
    who = await caller(request)
    pre = parse_prefix(prefix)
    sid = session_id if session_id is not None else session
    if as_of is not None:
        then, moment = await runtime(request).history.read(
            who.workspace,
            as_of,
            lambda c: live_claims(c, who.workspace, issue, sid, pre, limit),
            history=False,
            tables=LIVE_CLAIMS_TABLES,
        )
        return json({"file_claims": then, "as_of": moment})
    rows = await runtime(request).store.query(lambda c: live_claims(c, who.workspace, issue, sid, pre, limit))
    return json({"file_claims": rows})


@get("/v1/conflicts", operation_id="listConflicts", summary="The conflict log")
async def list_conflicts(
    request: Req,
    since: Annotated[str | None, Parameter(description="RFC 3339, inclusive")] = None,
    until: Annotated[str | None, Parameter(description="RFC 3339, exclusive")] = None,
    prefix: Annotated[str | None, Parameter(description="only requested paths at or below this prefix")] = None,
    after: Annotated[int, Parameter(ge=0, description="exclusive position cursor")] = 0,
    limit: Annotated[int, Parameter(ge=1, description="page size, clamped to 1000")] = 100,
    before: Annotated[
        int | None, Parameter(ge=1, le=2**63 - 1, description="exclusive upper position: the last `limit` below it")
    ] = None,
) -> Response[bytes]:
    """``{"conflicts": [...]}``: every contended path, rejected or forced, in position order.

    ``before`` pages backwards: the newest ``limit`` conflicts with a smaller position.
    """
    who = await caller(request)
    since_us, until_us = parse_window(since, until)
    pre = parse_prefix(prefix)
    rows = await runtime(request).store.query(
        lambda c: conflict_log(c, who.workspace, since_us, until_us, pre, after, min(limit, 1000), before)
    )
    return json({"conflicts": rows})


@get("/v1/heatmap", operation_id="codeHeatmap", summary="Claims or contention per path prefix")
async def heatmap(
    request: Req,
    mode: Annotated[str, Parameter(description="claims (work) or contention (collisions)")] = "claims",
    since: Annotated[str | None, Parameter(description="RFC 3339, inclusive; default all time")] = None,
    until: Annotated[str | None, Parameter(description="RFC 3339, exclusive; default all time")] = None,
    prefix: Annotated[str | None, Parameter(description="drill down: only paths at or below this prefix")] = None,
    depth: Annotated[int, Parameter(ge=1, le=64, description="path segments per bucket")] = 1,
    limit: Annotated[int, Parameter(ge=1, le=10000, description="at most this many buckets")] = 1000,
    as_of: Annotated[
        str | None, Parameter(description="As of a position or an RFC 3339 time (docs/protocol.md#history)")
    ] = None,
) -> Response[bytes]:
    """``{mode, buckets: [{prefix, count, leaf}]}`` sorted by count, descending.

    Claims mode counts claimed paths recorded in ``[since, until)``; contention mode counts
    ClaimConflict events. A bucket is the first ``depth`` segments of the path, verbatim;
    ``leaf`` says every path counted in it ends there (a file: nothing below to drill into).
    """
    who = await caller(request)
    if mode not in ("claims", "contention"):
        raise errors.invalid("mode", f"mode must be 'claims' or 'contention', got {mode!r}")
    since_us, until_us = parse_window(since, until)
    pre = parse_prefix(prefix)
    m: HeatmapMode = "claims" if mode == "claims" else "contention"
    if as_of is not None:
        then, moment = await runtime(request).history.read_upto(
            who.workspace,
            as_of,
            lambda c, p: heatmap_buckets(c, who.workspace, m, since_us, until_us, pre, depth, limit, upto=p),
        )
        return json({"mode": m, "depth": depth, "prefix": pre, "buckets": then, "as_of": moment})
    buckets = await runtime(request).store.query(
        lambda c: heatmap_buckets(c, who.workspace, m, since_us, until_us, pre, depth, limit)
    )
    return json({"mode": m, "depth": depth, "prefix": pre, "buckets": buckets})
