"""Read models of the files tier: live and past file claims, and the conflict log.

``file_claims`` keeps every claim (released ones too: the claims heatmap counts them);
``conflicts`` is append-only, one row per ClaimConflict, rejected or forced. Every
statement is built once (``Prepared``); a release finds the holder's unreleased claims of
the issue through the partial index of unreleased claims by issue, never its history.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Cast, Connection, bindparam, cast, text
from sqlalchemy.types import NullType

from eventcoord.domain.paths import literal_prefix
from eventcoord.events import ClaimConflict, FileClaimReleased, FilesClaimed
from eventcoord.store.key_spans import KeySpans
from eventcoord.store.log import RecordedEvent
from eventcoord.store.prepared import Prepared, text_list

from . import keys
from .base import Appliers
from .tables import conflicts, file_claims


def _bool(name: str) -> Cast[bool]:
    """A boolean parameter the drivers take as is (no SQLAlchemy bind processing)."""
    return cast(bindparam(name, type_=NullType()), Boolean)


_INSERT_CLAIM = Prepared(
    lambda d: file_claims.insert().values(
        position=bindparam("position"),
        idx=bindparam("idx"),
        workspace=bindparam("ws"),
        issue=bindparam("issue"),
        session_id=bindparam("sid"),
        actor_key=bindparam("actor"),
        path=bindparam("path"),
        literal_prefix=bindparam("prefix"),
        exclusive=_bool("exclusive"),
        claimed_us=bindparam("at"),
    )
)
#: PostgreSQL: a claim's paths in one statement over arrays, so the batch can defer it
#: (``Prepared.write``) and send it with its next statement, where ``executemany`` is a
#: round trip of its own. Its rows are named by their live keys (``spans``): the next
#: claim's probes of ranges that hold none of them may carry it.
_INSERT_CLAIMS_PG = Prepared(
    lambda d: text(
        "INSERT INTO file_claims (position, idx, workspace, issue, session_id, actor_key, path, literal_prefix,"
        " exclusive, claimed_us) SELECT CAST(:position AS bigint), CAST(u.n - 1 AS integer), CAST(:ws AS varchar),"
        " CAST(:issue AS varchar), CAST(:sid AS varchar), CAST(:actor AS varchar), u.path, u.prefix,"
        " CAST(:exclusive AS boolean), CAST(:at AS bigint)"
        " FROM unnest(CAST(:paths AS varchar[]), CAST(:prefixes AS varchar[])) WITH ORDINALITY AS u(path, prefix, n)"
    ),
    writes="file_claims",
    rows={"file_claims": ("spans",)},
)
#: An issue's live key on PostgreSQL (NULL once released): ``ix_file_claims_issue_live_key``
#: is the only index on it; ``issue_key`` builds the value it is compared with
#: (``keys.CLAIM_ISSUE``).
PG_ISSUE_KEY = keys.CLAIM_ISSUE.sql()
issue_key = keys.claim_issue_key
#: A live claim's prefix key (``keys.CLAIM_PREFIX``): the value its probes compare.
live_key = keys.claim_prefix_key


# The holder's unreleased claims of the issue on these paths (matched as normalised strings).
_RELEASE = Prepared(
    lambda d: (
        text(
            "UPDATE file_claims INDEXED BY ix_file_claims_issue_live SET released_us = :at, release_reason = :reason"
            " WHERE workspace = :ws AND issue = :issue AND session_id IS :sid AND released_us IS NULL"
            " AND path IN (SELECT value FROM json_each(:paths))"
        )
        if d == "sqlite"
        else text(  # by the issue's live key: the only index on it (0011_one_index_each)
            f"UPDATE file_claims SET released_us = :at, release_reason = :reason WHERE {PG_ISSUE_KEY} = :key"
            " AND session_id IS NOT DISTINCT FROM CAST(:sid AS text) AND path = ANY(CAST(:paths AS text[]))"
        )
    ),
    writes="file_claims",
    rows={"file_claims": ("key",)},  # an issue's live claims: a read of another issue's may carry it
    # PostgreSQL: the live keys of the claims it releases; a batch's reads ahead of claims
    # whose ranges hold none of them still hold (``Batch.forget_rows_ahead``).
    at_spans={"file_claims": "spans"},
)
_INSERT_CONFLICT = Prepared(
    lambda d: conflicts.insert().values(
        position=bindparam("position"),
        workspace=bindparam("ws"),
        path=bindparam("path"),
        issue=bindparam("issue"),
        session_id=bindparam("sid"),
        holder_path=bindparam("holder_path"),
        holder_issue=bindparam("holder_issue"),
        holder_session_id=bindparam("holder_sid"),
        forced=_bool("forced"),
        occurred_us=bindparam("at"),
        actor_key=bindparam("actor"),
        holder_actor_key=bindparam("holder_actor"),
    )
)


def files_claimed(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, FilesClaimed)
    ws = r.metadata.workspace
    if conn.dialect.name == "postgresql":
        prefixes = [literal_prefix(path) for path in e.paths]
        _INSERT_CLAIMS_PG.write(
            conn,
            {
                "position": r.position,
                "ws": ws,
                "issue": e.issue,
                "sid": e.session_id,
                "actor": e.actor_key,
                "exclusive": e.exclusive,
                "at": r.recorded_us,
                "paths": list(e.paths),
                "prefixes": prefixes,
                "spans": KeySpans.points(live_key(ws, p) for p in prefixes),
            },
        )
        return
    _INSERT_CLAIM.many(
        conn,
        [
            {
                "position": r.position,
                "idx": idx,
                "ws": ws,
                "issue": e.issue,
                "sid": e.session_id,
                "actor": e.actor_key,
                "path": path,
                "prefix": literal_prefix(path),
                "exclusive": e.exclusive,
                "at": r.recorded_us,
            }
            for idx, path in enumerate(e.paths)
        ],
    )


def file_claim_released(conn: Connection, r: RecordedEvent) -> None:
    """Release the holder's unreleased claims on these paths (matched as normalised strings)."""
    e = r.event
    assert isinstance(e, FileClaimReleased)
    if not e.paths:
        return
    ws = r.metadata.workspace
    params = {
        "at": r.recorded_us,
        "reason": e.reason,
        "ws": ws,
        "issue": e.issue,
        "key": issue_key(ws, e.issue),
        "sid": e.session_id,
        "paths": text_list(conn, e.paths),
    }
    if conn.dialect.name == "postgresql":
        params["spans"] = KeySpans.points(live_key(ws, literal_prefix(p)) for p in e.paths)
    _RELEASE.write(conn, params)


def claim_conflict(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, ClaimConflict)
    _INSERT_CONFLICT.write(
        conn,
        {
            "position": r.position,
            "ws": r.metadata.workspace,
            "path": e.path,
            "issue": e.issue,
            "sid": e.session_id,
            "holder_path": e.holder_path,
            "holder_issue": e.holder_issue,
            "holder_sid": e.holder_session_id,
            "forced": e.forced,
            "at": r.recorded_us,
            "actor": e.actor_key,
            "holder_actor": e.holder_actor_key,
        },
    )


APPLIERS: Appliers = {
    FilesClaimed: files_claimed,
    FileClaimReleased: file_claim_released,
    ClaimConflict: claim_conflict,
}
