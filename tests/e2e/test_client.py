"""The typed client against a real server: a method per command and per read, typed results,
refusals raised as ``Refused`` by code family (``from eventcoord.client import …``)."""

from __future__ import annotations

import pytest
from tests.helpers import BOOTSTRAP, ServerProcess, free_port

from eventcoord.client import (
    AccessDenied,
    AsyncClient,
    Client,
    Contended,
    InvalidRequest,
    NotCurrent,
    Refused,
    Unreachable,
    results,
)


def test_every_command_and_read_through_the_sync_client(server: ServerProcess) -> None:
    with Client(server.base_url, BOOTSTRAP) as ec:
        me = ec.register_agent(actor="alice", host="laptop")
        assert isinstance(me, results.RegisterAgentResult) and me.stable and me.identity_source == "explicit-override"
        sid = me.session_id
        assert ec.heartbeat_agent(session_id=sid, working_on="P-1").last_heartbeat_at.endswith("Z")
        ec.configure_project(project="P", wip_limit=2)
        token = ec.issue_token(role="agent")
        assert token.token and token.token.startswith("ec_")
        lease = ec.claim_issue(session_id=sid, project="P", issue="P-1")
        assert (lease.issue, lease.fencing_token, lease.reclaimed_from) == ("P-1", 1, None)
        assert ec.claim_issue(session_id=sid, project="P", issue="P-1").fencing_token == 1  # already mine
        files = ec.claim_files(session_id=sid, issue="P-1", paths=["src/", "README.md"])
        assert files.claimed == ["src/", "README.md"] and files.overridden == []
        assert ec.release_files(session_id=sid, issue="P-1", paths=["README.md"]).released == ["README.md"]
        assert ec.post_message(session_id=sid, channel="issue:P-1", body="starting").position > 0
        hold = ec.verify_hold(session_id=sid, issue="P-1", fencing_token=1)
        assert (hold.ok, hold.enforced, hold.effective_state) == (True, True, "self_is_holder")
        item = ec.enqueue_work(project="Q", issue="Q-1", priority=3, payload={"k": [1, 2]}).item_id
        taken = ec.claim_next_work(session_id=sid, project="Q").item
        assert taken is not None and (taken.item_id, taken.payload, taken.fencing_token) == (item, {"k": [1, 2]}, 1)
        assert ec.claim_next_work(session_id=sid, project="Q").item is None
        ec.start_work(session_id=sid, item_id=item)
        assert ec.finish_work(session_id=sid, item_id=item, outcome="done").status == "done"
        named = ec.acquire_lease(session_id=sid, name="dispatcher", ttl_seconds=30)
        assert named.fencing_token == 1 and ec.renew_lease(session_id=sid, name="dispatcher").renewed
        assert ec.list_named_leases().leases[0].name == "dispatcher"
        ec.release_lease(session_id=sid, name="dispatcher")

        # Reads, typed.
        [agent] = ec.list_agents(live=True).agents
        assert (agent.session_id, agent.host, agent.working_on) == (sid, "laptop", "P-1")
        assert ec.get_agent(sid).agent.actor_key == "alice"
        [held] = ec.list_leases(project="P").leases
        assert (held.issue, held.fencing_token, held.live) == ("P-1", 1, True)
        state = ec.get_issue_state("P-1", as_=sid)
        assert state.state == "self_is_holder" and state.holder is not None and state.holder.session_id == sid
        assert ec.get_issue_state("never-claimed").state == "free"
        assert [c.path for c in ec.list_file_claims(issue="P-1").file_claims] == ["src/"]
        assert ec.list_conflicts().conflicts == []
        assert [b.prefix for b in ec.get_code_heatmap(mode="claims", depth=1).buckets] == ["README.md", "src"]
        assert ec.list_queue(project="Q").items[0].status == "done"
        assert [m.body for m in ec.read_messages(channel="issue:P-1").messages] == ["starting"]
        log = ec.read_events(after=0, limit=3).events
        assert [e.position for e in log] == [1, 2, 3] and log[0].type == "AgentRegistered"
        assert [e.position for e in ec.events(after=1, limit=1)] == [2]

        assert ec.release_issue(session_id=sid, issue="P-1", reason="completed").reason == "completed"
        ended = ec.end_agent(session_id=sid, handoff_note="done")
        assert ended.released_claims == ["src/"]


def test_waiting_lines_capacity_and_project_limits_through_the_sync_client(server: ServerProcess) -> None:
    """Waiting through typed methods: wait, list_waits, cancel_wait, capacity slots, configure_project."""
    with Client(server.base_url, BOOTSTRAP) as ec:
        holder, first, second = (ec.register_agent(actor=a).session_id for a in ("holder", "first", "second"))
        ec.configure_project(project="W", wip_limit=5, lock_delay_seconds=0, agent_wip_limit=2)
        ec.claim_issue(session_id=holder, project="W", issue="W-1")
        for place, sid in enumerate((first, second), start=1):
            with pytest.raises(Contended) as waiting:
                ec.claim_issue(session_id=sid, project="W", issue="W-1", wait=True)
            assert waiting.value.code == "ISSUE_HELD" and waiting.value.details["waiting"]["place"] == place
        lines = ec.list_waits().waits
        assert all(isinstance(w, results.Wait) for w in lines)
        assert [(w.kind, w.key, w.session_id, w.actor_key, w.place) for w in lines] == [
            ("issue", "W-1", first, "first", 1),
            ("issue", "W-1", second, "second", 2),
        ]
        page = ec.list_waits(limit=1)  # paged: the next page goes on after the first
        assert [w.place for w in page.waits] == [1] and page.next is not None
        rest = ec.list_waits(after=page.next, limit=1)
        assert [(w.session_id, w.place) for w in rest.waits] == [(second, 2)] and rest.next is None
        left = ec.cancel_wait(session_id=second, issue="W-1")
        assert isinstance(left, results.CancelWaitResult) and (left.kind, left.key) == ("issue", "W-1")
        ec.release_issue(session_id=holder, issue="W-1")
        assert ec.list_waits().waits == []
        [lease] = ec.list_leases(project="W").leases
        assert (lease.session_id, lease.fencing_token) == (first, 2)  # handed to the first waiter

        # A named lease of capacity 2: two holders with their own tokens, a third waits.
        slots = [ec.acquire_lease(session_id=s, name="gpu", ttl_seconds=60, capacity=2) for s in (holder, first)]
        assert [s.fencing_token for s in slots] == [1, 2]
        with pytest.raises(Contended) as full:
            ec.acquire_lease(session_id=second, name="gpu", ttl_seconds=60, capacity=2, wait=True)
        assert full.value.code == "LEASE_HELD" and full.value.details["waiting"]["place"] == 1
        rows = [r for r in ec.list_named_leases().leases if r.name == "gpu"]
        assert [(r.session_id, r.fencing_token, r.capacity, r.held) for r in rows] == [
            (holder, 1, 2, True),
            (first, 2, 2, True),
        ]
        assert all(r.expires_at and r.acquired_at and r.ttl_seconds == 60 for r in rows)
        assert [(w.kind, w.key, w.session_id) for w in ec.list_waits().waits] == [("lease", "gpu", second)]


async def test_refusals_raise_by_code_family_through_the_async_client(server: ServerProcess) -> None:
    async with AsyncClient(server.base_url, BOOTSTRAP) as ec:
        a = (await ec.register_agent(actor="a")).session_id
        b = (await ec.register_agent(actor="b")).session_id
        await ec.claim_issue(session_id=a, project="P", issue="P-1")
        with pytest.raises(Contended) as held:
            await ec.claim_issue(session_id=b, project="P", issue="P-1")
        assert held.value.code == "ISSUE_HELD" and held.value.details["session_id"] == a and held.value.status == 409
        await ec.claim_files(session_id=a, issue="P-1", paths=["src/"])
        with pytest.raises(Contended) as files:
            await ec.claim_files(session_id=b, issue="P-2", paths=["src/main.py"])
        assert files.value.code == "FILES_CLAIMED" and files.value.details["conflicts"][0]["holder_session_id"] == a
        with pytest.raises(NotCurrent) as stale:
            await ec.verify_hold(session_id=a, issue="P-1", fencing_token=41)
        assert stale.value.code == "NOT_FRESH_HOLDER"
        with pytest.raises(InvalidRequest) as invalid:
            await ec.claim_files(session_id=a, issue="P-1", paths=["../up"])
        assert invalid.value.code == "VALIDATION" and invalid.value.details["field"].startswith("paths")
        with pytest.raises(Refused) as missing:
            await ec.get_agent("s-nobody")
        assert missing.value.code == "NOT_FOUND"
        # The untyped primitives share the same refusals.
        with pytest.raises(Contended):
            await ec.command({"type": "claim_issue", "session_id": b, "project": "P", "issue": "P-1"})
    async with AsyncClient(server.base_url, "wrong") as denied:
        with pytest.raises(AccessDenied) as e:
            await denied.list_agents()
        assert e.value.code == "UNAUTHENTICATED" and e.value.status == 401
    async with AsyncClient(f"http://127.0.0.1:{free_port()}", BOOTSTRAP) as nowhere:
        with pytest.raises(Unreachable):
            await nowhere.list_agents()
