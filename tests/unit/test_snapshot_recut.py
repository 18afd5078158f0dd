"""A snapshot that re-cuts only the chunks of changed rows is the snapshot that cuts every row.

``snapshots.dump_changed`` builds on the previous dump's layout and the keys a scratch's
triggers noted (``Scratch.track_changes``); whatever rows were inserted, updated, deleted or
made history in between, its manifest and layout must be exactly :func:`snapshots.dump`'s,
and every chunk the manifest names must have been produced by one dump or another (file
claims are counted by path as they are inserted, so the counts' chunks are re-cut too). Small
chunks (a boundary every ~3 keys, at most 5 rows) make every run cross many chunks.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, func, insert, select, update

from eventcoord.history import snapshots
from eventcoord.history.scratch import Scratch
from eventcoord.projections.tables import file_claims, issues, leases

WORKSPACES = ("w1", "w2")
ISSUE = st.text(alphabet="abkxz", min_size=1, max_size=3)
LEASE = st.integers(min_value=1, max_value=60)

OPS = st.one_of(
    st.tuples(st.just("issue"), st.sampled_from(WORKSPACES), ISSUE, st.integers(0, 3)),
    st.tuples(st.just("drop issue"), st.sampled_from(WORKSPACES), ISSUE),
    st.tuples(st.just("lease"), LEASE, st.sampled_from(WORKSPACES)),
    st.tuples(st.just("release"), LEASE),
    st.tuples(st.just("drop lease"), LEASE),
    # A file claim: counted by path (``path_counts``, kept only in snapshots) as it is inserted.
    st.tuples(st.just("claim"), st.sampled_from(WORKSPACES), st.sampled_from(["a", "a/b", "c", "d/e/f"])),
)


def apply(s: Scratch, op: tuple[Any, ...]) -> None:
    with s.engine.begin() as c:
        kind = op[0]
        if kind == "issue":
            _, ws, issue, token = op
            c.execute(delete(issues).where((issues.c.workspace == ws) & (issues.c.issue == issue)))
            c.execute(insert(issues).values(workspace=ws, issue=issue, project="P", last_fencing_token=token))
        elif kind == "drop issue":
            c.execute(delete(issues).where((issues.c.workspace == op[1]) & (issues.c.issue == op[2])))
        elif kind == "lease":
            _, lease_id, ws = op
            c.execute(delete(leases).where(leases.c.lease_id == lease_id))
            c.execute(
                insert(leases).values(
                    lease_id=lease_id,
                    workspace=ws,
                    issue=f"I-{lease_id}",  # one unreleased lease per issue
                    project="P",
                    session_id="s",
                    actor_key="a",
                    fencing_token=lease_id,
                    granted_us=lease_id,
                )
            )
        elif kind == "release":
            c.execute(update(leases).where(leases.c.lease_id == op[1]).values(released_us=7, release_reason="released"))
        elif kind == "claim":
            _, ws, path = op
            position = (c.execute(select(func.max(file_claims.c.position))).scalar() or 0) + 1
            c.execute(
                insert(file_claims).values(
                    position=position,
                    idx=0,
                    workspace=ws,
                    issue="I",
                    session_id="s",
                    actor_key="a",
                    path=path,
                    literal_prefix=path,
                    exclusive=True,
                    claimed_us=position,
                )
            )
        else:
            c.execute(delete(leases).where(leases.c.lease_id == op[1]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=st.lists(OPS, max_size=60), rounds=st.lists(st.lists(OPS, max_size=25), min_size=1, max_size=4))
def test_recutting_changed_chunks_gives_what_cutting_every_row_gives(
    first: list[tuple[Any, ...]], rounds: list[list[tuple[Any, ...]]]
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(snapshots, "BOUNDARY", 3)
        mp.setattr(snapshots, "MAX_ROWS", 5)
        s = Scratch(0, None, 120, None, counting=True)
        s.count_paths()
        try:
            for op in first:
                apply(s, op)
            start = s.read(snapshots.dump)
            produced = set(start.chunks)
            layout = start.layout
            s.drop_history()
            s.track_changes()
            for ops in rounds:
                for op in ops:
                    apply(s, op)
                changed = s.take_changes()
                got = s.read(lambda c, layout=layout, changed=changed: snapshots.dump_changed(c, layout, changed, ()))
                want = s.read(snapshots.dump)
                assert got.manifest == want.manifest
                assert got.layout == want.layout
                produced |= set(got.chunks)
                assert {h for per_ws in got.manifest.values() for hs in per_ws.values() for h in hs} <= produced
                # As the snapshotter does: history rows are stored now, and leave the scratch.
                s.drop_history()
                s.take_changes()
                layout = got.layout
        finally:
            s.close()


def test_changes_are_noted_by_key_and_cleared_when_taken() -> None:
    s = Scratch(0, None, 120, None, counting=True)
    s.count_paths()
    try:
        s.track_changes()
        apply(s, ("issue", "w1", "a", 1))
        apply(s, ("lease", 5, "w2"))
        apply(s, ("release", 5))
        apply(s, ("claim", "w1", "a/b"))
        assert s.take_changes() == {
            ("issues", "w1"): {("w1", "a")},
            ("leases", "w2"): {(5,)},
            ("file_claims", "w1"): {(1, 0)},
            ("path_counts", "w1"): {("w1", "claims", "a/b")},
        }
        assert s.take_changes() == {}
    finally:
        s.close()
