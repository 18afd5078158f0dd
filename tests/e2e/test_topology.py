"""docker-compose.yml and tests/topology.py describe the same deployment, and it runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from tests.helpers import IN_CI, PG_URL, ROOT, Api, wait_until
from tests.topology import REPLICA_ENV, REPLICAS, SERVICES, Topology

from eventcoord.client.subscriber import subscribe


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def test_docker_compose_describes_the_topology_the_script_starts() -> None:
    services = compose()["services"]
    assert set(services) == set(SERVICES)
    replicas = [name for name, s in services.items() if s.get("command", [])[:2] == ["eventcoord", "serve"]]
    assert len(replicas) == REPLICAS
    assert services["nats"]["command"][:1] == ["-js"] and "-sd" in services["nats"]["command"]
    assert services["migrate"]["command"] == ["eventcoord", "migrate"] and services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    db_urls = {services["migrate"]["environment"]["EVENTCOORD_DB_URL"]}
    for name in replicas:
        s = services[name]
        assert set(s["environment"]) == set(REPLICA_ENV)
        db_urls.add(s["environment"]["EVENTCOORD_DB_URL"])
        assert s["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"},
            "nats": {"condition": "service_healthy"},
        }
        assert "/health" in " ".join(s["healthcheck"]["test"])
    assert len(db_urls) == 1  # one database for the migrations and every replica
    for name in ("postgres", "nats"):
        assert services[name]["healthcheck"]["test"], name
    assert "js-enabled-only" in " ".join(services["nats"]["healthcheck"]["test"])


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL and not IN_CI, reason="EVENTCOORD_TEST_PG_URL not set")
async def test_the_topology_starts_from_local_processes_and_serves(tmp_path: Path) -> None:
    with Topology(tmp_path) as topo:
        assert len(topo.replicas) == REPLICAS
        a, b = (Api(url) for url in topo.urls)
        try:
            for url in topo.urls:
                health = httpx.get(url + "/health").json()
                assert health["relay"]["nats_url"] == topo.nats.url
            sid = await a.register(actor="compose")
            await b.ok({"type": "heartbeat_agent", "session_id": sid})  # one database behind both
            assert [e["type"] for e in await a.events()] == ["AgentRegistered", "AgentHeartbeat"]
            got: list[int] = []

            async def receive() -> None:
                async for ev in subscribe(topo.nats.url, workspace="default"):
                    got.append(ev.position)
                    if len(got) == 2:
                        return

            await wait_until(
                lambda: all(httpx.get(u + "/health").json()["relay"].get("lag") == 0 for u in topo.urls), 30, "relay"
            )
            await asyncio.wait_for(receive(), 30)
            assert got == [1, 2]
        finally:
            await a.close()
            await b.close()
