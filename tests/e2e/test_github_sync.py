"""``eventcoord github sync`` against a real server on both backends, with a stand-in ``gh``.

GitHub is the one thing this machine cannot reach: ``tests/fake_gh.py`` plays ``gh``, keeps
the issues in a JSON file and refuses (loudly) any call the mirror may not make — every
test checks that none was made. eventcoord runs for real: a server process, its HTTP API,
the CLI as a user runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from tests.fake_gh import FakeGitHub
from tests.helpers import BOOTSTRAP, ROOT, Api, ServerProcess, advance_clock, run_cli, wait_until

REPO = "acme/widgets"
WIP, QUEUED = "WIP", "ai-dev-queued"
#: How soon a following sync shows a change (the contract).
FOLLOW_SECONDS = 5.0


class Mirror:
    """The stand-in GitHub and a way to run the sync against one server."""

    def __init__(self, tmp_path: Path, server: ServerProcess) -> None:
        self.tmp = tmp_path
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        self.gh_program = bin_dir / "gh"
        self.gh_program.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT / "tests" / "fake_gh.py"}" "$@"\n')
        self.gh_program.chmod(0o755)
        self.github = FakeGitHub(tmp_path / "github.json")
        self.github.create(REPO)
        self.logins = tmp_path / "logins.json"
        self.logins.write_text(json.dumps({"alice": "alice-gh", "bob": "bob-gh"}))
        self.env = {
            "EVENTCOORD_URL": server.base_url,
            "EVENTCOORD_TOKEN": BOOTSTRAP,
            "FAKE_GH_STATE": str(self.github.path),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.runs = 0

    def argv(self, *args: str) -> list[str]:
        return ["github", "sync", "--repo", REPO, "--logins", str(self.logins), *args]

    def sync(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """One run of the CLI, each from a directory of its own (as a CI runner would)."""
        self.runs += 1
        cwd = self.tmp / f"run{self.runs}"
        cwd.mkdir()
        return run_cli(*self.argv(*args), env={**self.env, **(env or {})}, cwd=cwd)

    def apply(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = self.sync("--apply", *args)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    def labels(self, n: int) -> set[str]:
        return set(self.github.issue(REPO, n)["labels"])

    def assignees(self, n: int) -> set[str]:
        return set(self.github.issue(REPO, n)["assignees"])

    def comments(self, n: int) -> list[str]:
        comments: list[str] = self.github.issue(REPO, n)["comments"]
        return comments


@pytest.fixture
async def mirror(tmp_path: Path, server: ServerProcess, api: Api) -> AsyncIterator[Mirror]:
    m = Mirror(tmp_path, server)
    await api.ok({"type": "configure_project", "project": "P", "wip_limit": 20})
    yield m
    assert m.github.read()["refused"] == [], "the sync made a gh call it may not make"


async def claim(api: Api, actor: str, issue: str, kind: str = "agent") -> tuple[str, int]:
    sid = await api.register(actor=actor, kind=kind)
    token = (await api.ok({"type": "claim_issue", "session_id": sid, "project": "P", "issue": issue, "force": True}))[
        "fencing_token"
    ]
    return sid, int(token)


async def test_render_prints_each_write_as_argv_and_changes_nothing(mirror: Mirror, api: Api) -> None:
    for n in (1, 2):
        mirror.github.add_issue(REPO, n)
    await claim(api, "alice", "P-1")
    await api.ok({"type": "enqueue_work", "project": "P", "issue": "P-2"})
    head = await api.head()
    # EVENTCOORD_GH names the program when there is no gh on PATH.
    done = mirror.sync("--render", env={"PATH": os.environ.get("PATH", ""), "EVENTCOORD_GH": str(mirror.gh_program)})
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines == [
        ["gh", "issue", "edit", "1", "--repo", REPO, "--add-label", WIP, "--add-assignee", "alice-gh"],
        ["gh", "issue", "edit", "2", "--repo", REPO, "--add-label", QUEUED],
    ]
    assert "rendered 2 gh writes" in done.stderr
    assert mirror.github.writes() == []
    assert await api.head() == head  # nothing written to eventcoord either


async def test_apply_mirrors_leases_and_the_queue_once_and_takes_back_only_its_own(mirror: Mirror, api: Api) -> None:
    mirror.github.add_issue(REPO, 1)
    mirror.github.add_issue(REPO, 2, labels=["bug"], assignees=["carol"])
    mirror.github.add_issue(REPO, 3)
    mirror.github.add_issue(REPO, 4, labels=[WIP])  # a person's WIP, with nobody assigned
    alice, _ = await claim(api, "alice", "P-1")
    await claim(api, "claude:thread-0:host", "repo#2")
    await api.ok({"type": "enqueue_work", "project": "P", "issue": "P-3"})
    await claim(api, "bob", "P-4")
    await claim(api, "bob", "P-99")  # no GitHub issue 99: skipped and counted
    await claim(api, "bob", "refactor")  # no number: not mirrored
    done = mirror.apply()
    assert "skipped 1 issue key with no open GitHub issue: P-99" in done.stderr
    assert (mirror.labels(1), mirror.assignees(1)) == ({WIP}, {"alice-gh"})
    assert (mirror.labels(2), mirror.assignees(2)) == ({"bug", WIP}, {"carol"})  # no login for claude
    assert (mirror.labels(3), mirror.assignees(3)) == ({QUEUED}, set())
    assert (mirror.labels(4), mirror.assignees(4)) == ({WIP}, {"bob-gh"})
    writes, head = len(mirror.github.writes()), await api.head()

    again = mirror.apply()
    assert "applied 0 gh writes" in again.stderr
    assert len(mirror.github.writes()) == writes and await api.head() == head

    await api.ok({"type": "end_agent", "session_id": alice})
    sessions = {lease["issue"]: lease["session_id"] for lease in (await api.get("/v1/leases"))["leases"]}
    for issue in ("repo#2", "P-4"):
        await api.ok({"type": "release_issue", "session_id": sessions[issue], "issue": issue})
    mirror.apply()
    assert (mirror.labels(1), mirror.assignees(1)) == (set(), set())
    assert (mirror.labels(2), mirror.assignees(2)) == ({"bug"}, {"carol"})  # a person's stay
    assert (mirror.labels(4), mirror.assignees(4)) == ({WIP}, set())  # the WIP was never the mirror's
    assert mirror.comments(1) == mirror.comments(2) == []


async def test_takeovers_get_one_comment_each_across_runs_and_restarts(
    mirror: Mirror, api: Api, start_server: Callable[..., ServerProcess], server: ServerProcess
) -> None:
    mirror.github.add_issue(REPO, 1)
    alice, t1 = await claim(api, "alice", "P-1")
    await api.ok({"type": "heartbeat_agent", "session_id": alice, "handoff_note": "parser done; ``` lexer next"})
    boss, t2 = await claim(api, "boss", "P-1", kind="human")
    mirror.apply()
    [comment] = mirror.comments(1)
    for part in (f"`{alice}`", f"`{boss}`", "`alice`", "`boss`", f"fencing token {t1}", f"fencing token {t2}"):
        assert part in comment
    assert "superseded" in comment and "parser done; ``` lexer next" in comment
    mirror.apply()
    server.stop()
    restarted = start_server()
    mirror.env["EVENTCOORD_URL"] = restarted.base_url
    mirror.apply()
    assert len(mirror.comments(1)) == 1


async def test_an_expired_lease_taken_over_gets_its_comment(
    tmp_path: Path, db_url: str, start_server: Callable[..., ServerProcess]
) -> None:
    server = start_server(ttl_seconds=1, test_clock=True)
    api = Api(server.base_url)
    m = Mirror(tmp_path, server)
    try:
        m.github.add_issue(REPO, 5)
        alice = await api.register(actor="alice")
        await api.ok({"type": "claim_issue", "session_id": alice, "project": "P", "issue": "P-5"})
        await api.ok({"type": "heartbeat_agent", "session_id": alice, "handoff_note": "half way"})
        bob = await api.register(actor="bob")

        async def stale() -> bool:
            await api.ok({"type": "heartbeat_agent", "session_id": bob})
            state = await api.get("/v1/issues/P-5/state", **{"as": bob})
            return bool(state["state"] == "reclaimable")

        for _ in range(2):  # past alice's TTL; bob beats between steps, each under it
            await api.ok({"type": "heartbeat_agent", "session_id": bob})
            await advance_clock(db_url, 0.6)
        deadline = time.monotonic() + 15
        while not await stale():
            assert time.monotonic() < deadline, "alice's lease never went stale"
        got = await api.ok({"type": "claim_issue", "session_id": bob, "project": "P", "issue": "P-5"})
        assert got["reclaimed_from"]["session_id"] == alice
        m.apply()
        m.apply()
        [comment] = m.comments(5)
        assert "expired" in comment and f"`{alice}`" in comment and f"`{bob}`" in comment
        assert "fencing token 1" in comment and "fencing token 2" in comment and "half way" in comment
        assert m.github.read()["refused"] == []
    finally:
        await api.close()


@pytest.mark.parametrize("failing", [2, 4])
async def test_a_sync_stopped_by_a_failing_write_and_run_again_loses_nothing_and_doubles_nothing(
    mirror: Mirror, api: Api, failing: int
) -> None:
    for n in (1, 2, 3):
        mirror.github.add_issue(REPO, n)
    mirror.github.set(REPO, 3, labels=[WIP], assignees=["erin"])
    await claim(api, "alice", "P-1")
    await claim(api, "boss", "P-1", kind="human")  # a takeover: one comment
    await claim(api, "bob", "P-2")
    bob3, _ = await claim(api, "bob", "P-3")  # erin's WIP: a message and a comment
    with mirror.github.editing() as state:
        state["fail_write"] = failing
    stopped = mirror.sync("--apply")
    assert stopped.returncode == 1
    assert f"write {failing} fails" in stopped.stderr and '["gh", "issue", ' in stopped.stderr
    assert len(mirror.github.writes()) == failing - 1

    mirror.apply()
    assert mirror.labels(1) == {WIP} and mirror.assignees(1) == set()
    assert mirror.labels(2) == {WIP} and mirror.assignees(2) == {"bob-gh"}
    assert mirror.labels(3) == {WIP} and mirror.assignees(3) == {"erin", "bob-gh"}
    assert len(mirror.comments(1)) == 1 and len(mirror.comments(3)) == 1
    messages = (await api.get("/v1/messages", channel=f"agent:{bob3}"))["messages"]
    assert len(messages) == 1 and "erin" in messages[0]["body"]
    writes = len(mirror.github.writes())
    assert "applied 0 gh writes" in mirror.apply().stderr
    assert len(mirror.github.writes()) == writes


async def test_a_persons_wip_becomes_a_human_hold_that_goes_with_the_label(mirror: Mirror, api: Api) -> None:
    mirror.github.add_issue(REPO, 7, labels=[WIP], assignees=["dana"])
    await api.ok({"type": "enqueue_work", "project": "P", "issue": "P-7"})
    mirror.apply("--project", "P")
    [hold] = (await api.get("/v1/leases"))["leases"]
    assert (hold["issue"], hold["actor_key"], hold["kind"]) == ("P-7", "github:dana", "human")
    agent = await api.client("agent")
    try:
        bot = await agent.register(actor="bot")
        await agent.error({"type": "claim_issue", "session_id": bot, "project": "P", "issue": "P-7"}, 409, "HUMAN_HELD")
        pulled = await agent.ok({"type": "claim_next_work", "session_id": bot, "project": "P"})
        assert pulled["item"] is None  # selection never hands out a person's issue
        assert mirror.labels(7) == {WIP} and mirror.github.writes() == []
        mirror.apply("--project", "P")
        assert len((await api.get("/v1/leases"))["leases"]) == 1  # still one hold, nothing new

        mirror.github.set(REPO, 7, labels=[])
        mirror.apply("--project", "P")
        assert (await api.get("/v1/leases"))["leases"] == []
        pulled = await agent.ok({"type": "claim_next_work", "session_id": bot, "project": "P"})
        assert pulled["item"]["issue"] == "P-7"
    finally:
        await agent.close()


async def test_a_persons_wip_on_an_agents_issue_is_told_once_never_taken(mirror: Mirror, api: Api) -> None:
    mirror.github.add_issue(REPO, 3, labels=[WIP], assignees=["erin"])
    sid, token = await claim(api, "claude:thread-1:host", "P-3")
    mirror.apply()
    mirror.apply()
    [message] = (await api.get("/v1/messages", channel=f"agent:{sid}"))["messages"]
    assert "erin" in message["body"] and "P-3" in message["body"]
    [comment] = mirror.comments(3)
    assert "@erin" in comment and sid in comment
    [lease] = (await api.get("/v1/leases"))["leases"]
    assert (lease["session_id"], lease["fencing_token"]) == (sid, token)


async def test_a_gh_that_fails_writes_nothing_and_bad_options_are_usage_errors(mirror: Mirror, api: Api) -> None:
    mirror.github.add_issue(REPO, 1)
    await claim(api, "alice", "P-1")
    head = await api.head()
    unknown = run_cli(*mirror.argv("--apply")[:3], "acme/nope", "--apply", env=mirror.env, cwd=mirror.tmp)
    assert unknown.returncode == 1
    assert "Could not resolve to a Repository with the name 'acme/nope'" in unknown.stderr
    with mirror.github.editing() as state:
        state["logged_in"] = False
    logged_out = mirror.sync("--apply")
    assert logged_out.returncode == 1 and "gh auth login" in logged_out.stderr
    assert await api.head() == head and mirror.github.writes() == []

    for text, problem in (
        ("[]", "not a JSON object of strings but an array"),
        ('{"alice": 1}', "the value of 'alice' is not a string"),
        ("{", "not JSON"),
    ):
        mirror.logins.write_text(text)
        bad = mirror.sync("--apply")
        assert bad.returncode == 2 and problem in bad.stderr, bad.stderr
    mirror.logins.unlink()
    assert mirror.sync("--apply").returncode == 2  # a file that is not there
    usage = [
        ["github", "sync", "--repo", REPO],
        ["github", "sync", "--repo", REPO, "--render", "--apply"],
        ["github", "sync", "--repo", "acme", "--apply"],
        ["github", "sync", "--repo", REPO, "--apply", "--project", "bad key"],
    ]
    for argv in usage:
        assert run_cli(*argv, env=mirror.env, cwd=mirror.tmp).returncode == 2, argv
    assert await api.head() == head


async def test_the_mirror_needs_a_human_or_admin_token(mirror: Mirror, api: Api) -> None:
    mirror.github.add_issue(REPO, 1)
    mirror.github.add_issue(REPO, 7, labels=[WIP], assignees=["dana"])
    await claim(api, "alice", "P-1")
    human = await api.token("human")
    assert mirror.sync("--apply", env={"EVENTCOORD_TOKEN": human}).returncode == 0
    assert mirror.labels(1) == {WIP}
    agent = await api.token("agent")
    # A hold is a human session: an agent token may not register one.
    refused = mirror.sync("--apply", "--project", "P", env={"EVENTCOORD_TOKEN": agent})
    assert refused.returncode == 4 and "FORBIDDEN" in refused.stderr, refused.stderr
    # Nor would its records count as the mirror's memory: the sync stops before any gh write.
    mirror.github.add_issue(REPO, 2)
    await claim(api, "bob", "P-2")
    writes = mirror.github.writes()
    refused = mirror.sync("--apply", env={"EVENTCOORD_TOKEN": agent})
    assert refused.returncode == 4 and "needs a human or admin token" in refused.stderr, refused.stderr
    assert mirror.github.writes() == writes


async def test_two_syncs_racing_for_the_memory_are_told_apart_by_the_server(mirror: Mirror, api: Api) -> None:
    from eventcoord.github.memory import command_id
    from eventcoord.github.names import memory_channel

    mirror.github.add_issue(REPO, 1)
    await claim(api, "alice", "P-1")
    # Another sync took the memory's next number a moment ago, with a record of its own.
    rival = {"type": "post_message", "channel": "project:elsewhere", "body": "{}"}
    await api.ok({**rival, "command_id": command_id(memory_channel(REPO), 1)})
    lost = mirror.sync("--apply")
    assert lost.returncode == 1 and "IDEMPOTENCY_MISMATCH" in lost.stderr, lost.stderr
    assert mirror.github.writes() == []  # it stopped before its write


class Follower:
    """``github sync --follow`` as a background process."""

    def __init__(self, m: Mirror, *args: str) -> None:
        self.log = m.tmp / f"follow{m.runs}.log"
        m.runs += 1
        script = Path(sys.executable).with_name("eventcoord")
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTCOORD_")} | m.env
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [str(script), *m.argv("--apply", "--follow", *args)], env=env, cwd=m.tmp, stdout=out, stderr=out
            )

    def text(self) -> str:
        return self.log.read_text()

    async def ready(self) -> None:
        await wait_until(lambda: f"github sync {REPO}:" in self.text() or self.proc.poll() is not None, 60, "a sync")
        assert self.proc.poll() is None, self.text()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


async def test_follow_shows_each_change_within_seconds(mirror: Mirror, api: Api) -> None:
    mirror.github.add_issue(REPO, 1)
    mirror.github.add_issue(REPO, 8)
    events = Follower(mirror, "--interval", "600")  # only the event stream can bring these in time
    try:
        await events.ready()
        sid, _ = await claim(api, "alice", "P-1")
        await wait_until(lambda: mirror.labels(1) == {WIP}, FOLLOW_SECONDS, "WIP on #1")
        assert mirror.assignees(1) == {"alice-gh"}
        await api.ok({"type": "release_issue", "session_id": sid, "issue": "P-1"})
        await wait_until(lambda: mirror.labels(1) == set(), FOLLOW_SECONDS, "WIP gone from #1")
        await api.ok({"type": "enqueue_work", "project": "P", "issue": "P-8"})
        await wait_until(lambda: mirror.labels(8) == {QUEUED}, FOLLOW_SECONDS, "ai-dev-queued on #8")
    finally:
        events.stop()
    # What happens on GitHub reaches eventcoord on the next periodic sync.
    polls = Follower(mirror, "--project", "P", "--interval", "1")
    try:
        await polls.ready()
        mirror.github.add_issue(REPO, 9, labels=[WIP], assignees=["dana"])

        def held() -> bool:
            leases = httpx.get(
                mirror.env["EVENTCOORD_URL"] + "/v1/leases", headers={"authorization": f"Bearer {BOOTSTRAP}"}
            ).json()["leases"]
            return any(lease["issue"] == "P-9" for lease in leases)

        await wait_until(held, 30, "a hold on P-9")
    finally:
        polls.stop()
