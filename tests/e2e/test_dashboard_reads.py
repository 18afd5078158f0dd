"""The two read parameters the dashboard added, and the /ui file routes, over HTTP."""

from __future__ import annotations

import httpx
from tests.helpers import Api, ServerProcess


async def test_leases_limit_bounds_the_page_in_the_usual_order(api: Api) -> None:
    sid = await api.register(actor="alice")
    await api.ok({"type": "configure_project", "project": "P", "wip_limit": 10})
    for n in (3, 1, 2):
        await api.ok({"type": "claim_issue", "session_id": sid, "project": "P", "issue": f"P-{n}"})
    everything = (await api.get("/v1/leases"))["leases"]
    assert [le["issue"] for le in everything] == ["P-1", "P-2", "P-3"]
    assert (await api.get("/v1/leases", limit=2))["leases"] == everything[:2]
    r = await api.http.get("/v1/leases", params={"limit": 0})
    assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION"


async def test_conflicts_before_answers_the_newest_page_below_a_position(api: Api) -> None:
    a, b = await api.register(actor="alice"), await api.register(actor="bob")
    await api.ok({"type": "claim_files", "session_id": a, "issue": "A-1", "paths": ["src/"]})
    for n in range(5):
        await api.error(
            {"type": "claim_files", "session_id": b, "issue": "B-1", "paths": [f"src/f{n}.py"]}, 409, "FILES_CLAIMED"
        )
    every = (await api.get("/v1/conflicts"))["conflicts"]
    positions = [c["position"] for c in every]
    assert len(positions) == 5 and positions == sorted(positions)
    newest = (await api.get("/v1/conflicts", before=2**53, limit=2))["conflicts"]
    assert [c["position"] for c in newest] == positions[-2:]  # the last page, still in position order
    below = (await api.get("/v1/conflicts", before=positions[3], limit=2))["conflicts"]
    assert [c["position"] for c in below] == positions[1:3]
    assert (await api.get("/v1/conflicts", before=positions[0]))["conflicts"] == []
    # Combined with the other filters: a window of positions, under a prefix.
    assert [
        c["path"]
        for c in (await api.get("/v1/conflicts", after=positions[0], before=positions[2], prefix="src"))["conflicts"]
    ] == ["src/f1.py"]
    r = await api.http.get("/v1/conflicts", params={"before": 0})
    assert r.status_code == 422 and r.json()["error"]["code"] == "VALIDATION"


def test_ui_files_are_served_with_a_strict_policy_and_etags(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.base_url) as http:
        page = http.get("/ui")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "/ui/js/main.js" in page.text
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "script-src 'self'" in csp
        assert page.headers["x-content-type-options"] == "nosniff"
        assert http.get("/ui/").text == page.text
        script = http.get("/ui/js/main.js")
        assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
        again = http.get("/ui/js/main.js", headers={"if-none-match": script.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
        for missing in ("/ui/nope.js", "/ui/../pyproject.toml", "/ui/js/../../routes.py", "/ui/%2e%2e/routes.py"):
            r = http.get(missing)
            assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND", missing
        # The files hold no data: no token needed; every API read still needs one.
        assert http.get("/v1/agents").status_code == 401
