"""Read models of the files tier: live and past file claims, and the conflict log.

``file_claims`` keeps every claim (released ones too: the claims heatmap counts them);
``conflicts`` is append-only, one row per ClaimConflict, rejected or forced.
"""

from __future__ import annotations

from sqlalchemy import Connection, update

from eventcoord.domain.paths import literal_prefix
from eventcoord.events import ClaimConflict, FileClaimReleased, FilesClaimed
from eventcoord.store.log import RecordedEvent

from .base import Appliers
from .tables import conflicts, file_claims


def files_claimed(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, FilesClaimed)
    conn.execute(
        file_claims.insert(),
        [
            {
                "position": r.position,
                "idx": idx,
                "workspace": r.metadata.workspace,
                "issue": e.issue,
                "session_id": e.session_id,
                "actor_key": e.actor_key,
                "path": path,
                "literal_prefix": literal_prefix(path),
                "exclusive": e.exclusive,
                "claimed_us": r.recorded_us,
                "released_us": None,
                "release_reason": None,
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
    holder = file_claims.c.session_id.is_(None) if e.session_id is None else file_claims.c.session_id == e.session_id
    conn.execute(
        update(file_claims)
        .where(
            (file_claims.c.workspace == r.metadata.workspace)
            & (file_claims.c.issue == e.issue)
            & holder
            & file_claims.c.path.in_(e.paths)
            & file_claims.c.released_us.is_(None)
        )
        .values(released_us=r.recorded_us, release_reason=e.reason)
    )


def claim_conflict(conn: Connection, r: RecordedEvent) -> None:
    e = r.event
    assert isinstance(e, ClaimConflict)
    conn.execute(
        conflicts.insert().values(
            position=r.position,
            workspace=r.metadata.workspace,
            path=e.path,
            issue=e.issue,
            session_id=e.session_id,
            holder_path=e.holder_path,
            holder_issue=e.holder_issue,
            holder_session_id=e.holder_session_id,
            forced=e.forced,
            occurred_us=r.recorded_us,
            actor_key=e.actor_key,
            holder_actor_key=e.holder_actor_key,
        )
    )


APPLIERS: Appliers = {
    FilesClaimed: files_claimed,
    FileClaimReleased: file_claim_released,
    ClaimConflict: claim_conflict,
}
