"""File claims and releases, decided without a database."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventcoord.commands import ClaimFiles, ReleaseFiles
from eventcoord.context import Caller, Context, Decision
from eventcoord.domain import files as domain
from eventcoord.domain.files import ClaimRow
from eventcoord.domain.paths import PathError, literal_prefix, overlaps
from eventcoord.domain.sessions import SessionState
from eventcoord.errors import DomainError
from eventcoord.events import ClaimConflict, Event, FileClaimReleased, FilesClaimed, MessagePosted
from eventcoord.reads.files import ancestors, prefix_upper_bound
from eventcoord.sanitize import BODY_CAP

NOW = 1_800_000_000_000_000
TTL = 120
ME = "s-me"
BOB = "s-bob"
DEAD = "s-dead"


def ctx(role: str = "agent") -> Context:
    return Context(Caller("default", role), NOW, TTL)  # type: ignore[arg-type]


def sess(sid: str, *, last_seen_us: int = NOW, ended_us: int | None = None) -> SessionState:
    return SessionState(sid, f"actor-{sid}", "agent", True, "explicit-override", None, last_seen_us, ended_us, None)


SESSIONS = {
    ME: sess(ME),
    BOB: sess(BOB),
    DEAD: sess(DEAD, last_seen_us=NOW - (TTL + 1) * 1_000_000),
}

_pos = iter(range(1, 10_000))


def row(path: str, *, issue: str = "OTHER-1", sid: str | None = BOB, exclusive: bool = True) -> ClaimRow:
    return ClaimRow(next(_pos), 0, issue, sid, f"actor-{sid}" if sid else "token:admin", path, exclusive)


def claim(*paths: str, held: list[ClaimRow] | None = None, role: str = "agent", **kw: Any) -> Decision:
    kw.setdefault("session_id", ME)
    cmd = ClaimFiles(issue="MINE-1", paths=list(paths), **kw)
    sid = kw["session_id"]
    return domain.decide_claim_files(
        domain.ClaimFilesState(SESSIONS.get(sid) if sid else None, held or [], SESSIONS), cmd, ctx(role)
    )


def kinds(d: Decision) -> list[str]:
    return [type(e).__name__ for _, e in d.events]


def of(d: Decision, cls: type[Event]) -> list[Any]:
    return [e for _, e in d.events if isinstance(e, cls)]


# --- validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("paths", "field", "reason"),
    [
        (["ok.py", ""], "paths[1]", "empty"),
        (["/etc/passwd"], "paths[0]", "absolute"),
        (["a", "b", "src/../x"], "paths[2]", "dotdot"),
        (["a\x00b"], "paths[0]", "control_char"),
        (["a\nb"], "paths[0]", "control_char"),
        (["x" * 1025], "paths[0]", "too_long"),
        (["/".join(["*"] * 17)], "paths[0]", "too_many_wildcards"),
    ],
)
def test_invalid_paths_are_422_naming_the_index(paths: list[str], field: str, reason: str) -> None:
    with pytest.raises(DomainError) as e:
        claim(*paths)
    assert e.value.code == "VALIDATION"
    assert e.value.details == {"field": field, "reason": reason}


def test_validation_comes_before_liveness() -> None:
    with pytest.raises(DomainError) as e:
        claim("../x", session_id=DEAD)
    assert e.value.code == "VALIDATION"


def test_paths_are_normalised_and_deduplicated() -> None:
    d = claim("./src//a.py", "src/a.py", "lib/./")
    (granted,) = of(d, FilesClaimed)
    assert granted.paths == ["src/a.py", "lib/"]
    assert d.result["claimed"] == ["src/a.py", "lib/"]


@pytest.mark.parametrize(("sid", "ended"), [(DEAD, False), ("s-ended", True)])
def test_claiming_session_must_be_live(sid: str, ended: bool) -> None:
    SESSIONS["s-ended"] = sess("s-ended", ended_us=NOW - 1)
    with pytest.raises(DomainError) as e:
        claim("a", session_id=sid)
    assert e.value.code == "SESSION_NOT_LIVE"
    assert e.value.details["ended"] is ended


def test_unknown_session_is_not_found() -> None:
    with pytest.raises(DomainError) as e:
        claim("a", session_id="s-nobody")
    assert e.value.code == "NOT_FOUND"


# --- overlap and modes ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "held", "conflict"),
    [
        ("src/a.py", "src/a.py", True),
        ("src/a.py", "src/", True),  # directory covers the file
        ("src/", "src/deep/er/x.c", True),
        ("src/x/a.py", "src/**/*.py", True),  # glob vs file
        ("src/*.py", "src/**/a.py", True),  # glob vs glob
        ("*", "README.md", True),
        ("*", "src/a.py", False),  # * never matches /
        ("src/a.py", "src/b.py", False),
        ("src/*.py", "src/*.rs", False),
        ("docs/", "src/", False),
        ("src", "src/", False),  # the file "src" is not inside the directory "src/"
    ],
)
def test_overlap_decides_conflicts(requested: str, held: str, conflict: bool) -> None:
    h = row(held)
    d = claim(requested, held=[h])
    if conflict:
        assert d.error is not None and d.error.code == "FILES_CLAIMED"
        assert kinds(d) == ["ClaimConflict"]
    else:
        assert d.error is None
        assert kinds(d) == ["FilesClaimed"]


@pytest.mark.parametrize(
    ("mine_exclusive", "theirs_exclusive", "conflict"),
    [(False, False, False), (True, False, True), (False, True, True), (True, True, True)],
)
def test_shared_coexist_only_with_shared(mine_exclusive: bool, theirs_exclusive: bool, conflict: bool) -> None:
    d = claim("src/", held=[row("src/a.py", exclusive=theirs_exclusive)], exclusive=mine_exclusive)
    assert (d.error is not None) is conflict
    if not conflict:
        assert of(d, FilesClaimed)[0].exclusive is mine_exclusive


# --- refusal --------------------------------------------------------------------------


def test_conflict_without_force_records_only_the_denials() -> None:
    a, b = row("src/", issue="A-1"), row("src/x/*.py", issue="B-1", sid=None)
    stale = row("src/z.py", issue="Z-1", sid=DEAD)
    d = claim("src/x/y.py", "src/q.py", "docs/", held=[a, b, stale])
    assert d.error is not None and d.error.code == "FILES_CLAIMED" and d.error.status == 409
    # one ClaimConflict per (requested path, holding claim), nothing else: no grant, no expiry
    assert kinds(d) == ["ClaimConflict"] * 3
    conflicts = of(d, ClaimConflict)
    assert [(c.path, c.holder_path) for c in conflicts] == [
        ("src/x/y.py", "src/"),
        ("src/x/y.py", "src/x/*.py"),
        ("src/q.py", "src/"),
    ]
    assert all(not c.forced and c.issue == "MINE-1" and c.session_id == ME for c in conflicts)
    assert conflicts[1].holder_session_id is None and conflicts[1].holder_actor_key == "token:admin"
    assert d.error.details == {
        "conflicts": [
            {
                "path": "src/x/y.py",
                "holder_path": "src/",
                "holder_issue": "A-1",
                "holder_session_id": BOB,
                "holder_actor_key": f"actor-{BOB}",
            },
            {
                "path": "src/x/y.py",
                "holder_path": "src/x/*.py",
                "holder_issue": "B-1",
                "holder_session_id": None,
                "holder_actor_key": "token:admin",
            },
            {
                "path": "src/q.py",
                "holder_path": "src/",
                "holder_issue": "A-1",
                "holder_session_id": BOB,
                "holder_actor_key": f"actor-{BOB}",
            },
        ]
    }
    assert all(stream == "files:MINE-1" for stream, _ in d.events)


# --- stale holders, own claims --------------------------------------------------------


def test_stale_holder_is_reclaimed_silently() -> None:
    stale = row("src/", issue="Z-1", sid=DEAD)
    d = claim("src/a.py", "src/b.py", held=[stale])
    assert d.error is None
    assert kinds(d) == ["FileClaimReleased", "FilesClaimed"]
    (released,) = of(d, FileClaimReleased)
    assert (released.issue, released.session_id, released.paths, released.reason, released.by_session_id) == (
        "Z-1",
        DEAD,
        ["src/"],
        "expired",
        ME,
    )
    assert d.result["expired"] == [{"holder_path": "src/", "holder_issue": "Z-1", "holder_session_id": DEAD}]


def test_stale_shared_holder_is_left_alone_by_a_shared_claim() -> None:
    d = claim("src/", held=[row("src/", sid=DEAD, exclusive=False)], exclusive=False)
    assert kinds(d) == ["FilesClaimed"]


def test_own_claims_never_conflict_and_identical_reclaim_is_a_no_op() -> None:
    mine = [row("src/", issue="MINE-1", sid=ME), row("lib/a.py", issue="MINE-1", sid=ME)]
    d = claim("src/a.py", "lib/a.py", held=mine)
    assert kinds(d) == ["FilesClaimed"]
    assert of(d, FilesClaimed)[0].paths == ["src/a.py"]
    assert d.result["already_held"] == ["lib/a.py"]
    again = claim("src/", "lib/a.py", held=mine)
    assert again.events == [] and again.error is None
    assert again.result["claimed"] == ["src/", "lib/a.py"]


def test_same_session_other_issue_is_a_conflict() -> None:
    d = claim("src/a.py", held=[row("src/", issue="MINE-2", sid=ME)])
    assert d.error is not None and d.error.code == "FILES_CLAIMED"


def test_changing_the_mode_of_an_own_claim_releases_and_reclaims() -> None:
    d = claim("src/", held=[row("src/", issue="MINE-1", sid=ME, exclusive=False)])
    assert kinds(d) == ["FileClaimReleased", "FilesClaimed"]
    assert of(d, FileClaimReleased)[0].reason == "released"
    assert of(d, FilesClaimed)[0].exclusive is True


def test_sessionless_claim_is_held_until_forced() -> None:
    admin_claim = row("src/", sid=None)
    d = claim("src/a.py", held=[admin_claim])
    assert d.error is not None and d.error.code == "FILES_CLAIMED"
    own = claim("src/a.py", held=[row("src/", issue="MINE-1", sid=None)], role="admin", session_id=None)
    assert kinds(own) == ["FilesClaimed"]
    assert of(own, FilesClaimed)[0].session_id is None and of(own, FilesClaimed)[0].actor_key == "token:admin"


# --- force ----------------------------------------------------------------------------


def test_force_overrides_in_order_and_notifies_both_sides() -> None:
    live = row("src/", issue="A-1", sid=BOB)
    stale = row("lib/", issue="Z-1", sid=DEAD)
    nobody = row("docs/", issue="N-1", sid=None)
    d = claim("src/a.py", "lib/x.py", "docs/*.md", held=[live, stale, nobody], force=True)
    assert d.error is None
    assert kinds(d) == ["FileClaimReleased"] * 3 + ["ClaimConflict"] * 2 + ["FilesClaimed"] + ["MessagePosted"] * 3
    expired, over_bob, over_nobody = of(d, FileClaimReleased)
    assert (expired.reason, expired.session_id) == ("expired", DEAD)
    assert (over_bob.reason, over_bob.session_id, over_bob.paths, over_bob.by_session_id) == (
        "overridden",
        BOB,
        ["src/"],
        ME,
    )
    assert (over_nobody.reason, over_nobody.session_id) == ("overridden", None)
    assert all(c.forced for c in of(d, ClaimConflict))
    assert [c.holder_path for c in of(d, ClaimConflict)] == ["src/", "docs/"]
    msgs = of(d, MessagePosted)
    assert [m.channel for m in msgs] == ["issue:MINE-1", f"agent:{BOB}", "issue:MINE-1"]
    assert "A-1" in msgs[0].body
    assert "src/" in msgs[1].body and "MINE-1" in msgs[1].body and ME in msgs[1].body
    assert "N-1" in msgs[2].body
    assert [s for s, _ in d.events][-3:] == ["channel:issue:MINE-1", f"channel:agent:{BOB}", "channel:issue:MINE-1"]
    assert [o["holder_issue"] for o in d.result["overridden"]] == ["A-1", "N-1"]


def test_forced_messages_are_sanitised_and_capped() -> None:
    long_paths = [f"d{i}/" + "x" * 1000 for i in range(8)]
    held = [row(p, issue="A-1") for p in long_paths]
    d = claim(*long_paths, held=held, force=True)
    assert all(len(m.body) <= BODY_CAP for m in of(d, MessagePosted))


# --- release -----------------------------------------------------------------


def test_release_named_paths_or_all() -> None:
    own = [row("src/", issue="MINE-1", sid=ME), row("lib/a.py", issue="MINE-1", sid=ME)]
    d = domain.decide_release_files(
        domain.ReleaseFilesState(SESSIONS[ME], own),
        ReleaseFiles(issue="MINE-1", session_id=ME, paths=["./src//", "nope"]),
        ctx(),
    )
    (e,) = of(d, FileClaimReleased)
    assert (e.paths, e.reason, e.session_id) == (["src/"], "released", ME)
    everything = domain.decide_release_files(
        domain.ReleaseFilesState(SESSIONS[ME], own), ReleaseFiles(issue="MINE-1", session_id=ME), ctx()
    )
    assert of(everything, FileClaimReleased)[0].paths == ["src/", "lib/a.py"]
    nothing = domain.decide_release_files(
        domain.ReleaseFilesState(SESSIONS[ME], []), ReleaseFiles(issue="MINE-1", session_id=ME), ctx()
    )
    assert nothing.events == [] and nothing.result == {"released": []}


def test_release_validates_paths() -> None:
    with pytest.raises(DomainError) as e:
        domain.decide_release_files(
            domain.ReleaseFilesState(SESSIONS[ME], []), ReleaseFiles(issue="I", session_id=ME, paths=["a", "/b"]), ctx()
        )
    assert e.value.details["field"] == "paths[1]"


# --- the candidate prefilter ----------------------------------------------------------


def test_prefilter_helpers() -> None:
    assert ancestors("a/b/c.py") == {"", "a/", "a/b/"}
    assert ancestors("a/b/") == {"", "a/", "a/b/"}
    assert prefix_upper_bound("src/") == "src0"
    assert prefix_upper_bound("a\U0010ffff") == "b"
    assert prefix_upper_bound("a\ud7ff") == "a\ue000"


_segment = st.sampled_from(["a", "b", "ab", "*", "a*", "?", "**", "[ab]", ".x", "\\*"])


@st.composite
def patterns(draw: st.DrawFn) -> str:
    segs = draw(st.lists(_segment, min_size=1, max_size=4))
    return "/".join(segs) + ("/" if draw(st.booleans()) else "")


@given(patterns(), patterns())
@settings(max_examples=2000, deadline=None)
def test_prefilter_never_drops_an_overlapping_claim(requested: str, held: str) -> None:
    """The SQL prefilter (held prefix is an ancestor of, or starts with, the requested one)."""
    try:
        p, q = literal_prefix(requested), literal_prefix(held)
    except PathError:
        return
    if overlaps(requested, held):
        assert q in ancestors(p) or q.startswith(p)
