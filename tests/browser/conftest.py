"""Browser-test setup: Debian's chromium driven by Playwright for Python, against real
``eventcoord serve`` processes on both backends.

Chromium comes from the system (``/usr/bin/chromium``); when it is missing the setup
installs it with ``apt-get install -y chromium`` (CI machines start without it; we run as
root). Playwright never downloads a browser. With ``CI=true`` the browser tests must run:
anything missing fails them instead of skipping.

Every test gets a fresh browser context; its page's console errors are collected, and a
screenshot of the final state is saved under ``tests/artifacts/browser/`` (ignored by git).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers import BOOTSTRAP, IN_CI

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts" / "browser"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"browser tests must run in CI: {reason}")
    pytest.skip(reason)


def ensure_chromium() -> str:
    """The system chromium, installed with apt-get when missing."""
    if not os.path.exists(CHROMIUM) and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "chromium"]
        if subprocess.run(install, env=env, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, capture_output=True)
            done = subprocess.run(install, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                _unavailable(f"apt-get install chromium failed: {done.stderr[-800:]}")
    if not os.path.exists(CHROMIUM):
        _unavailable(f"{CHROMIUM} is missing and could not be installed")
    return CHROMIUM


@pytest.fixture
def browser(db_url: str) -> Iterator[Any]:
    """A headless chromium for one test (Playwright's sync API).

    Per test, and set up after ``db_url``: while Playwright's sync API is started it keeps
    an event loop running in this thread, and the PostgreSQL fixtures' ``asyncio.run``
    (create and drop the test's database) must run outside it.
    """
    executable = ensure_chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:  # pragma: no cover - the test extra installs it
        _unavailable(f"playwright is not installed: {e}")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=executable, headless=True, args=LAUNCH_ARGS)
        try:
            yield b
        finally:
            b.close()


class PageLog:
    """What a page said and asked for: console errors, uncaught errors, request URLs."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []


@pytest.fixture
def page_log() -> PageLog:
    return PageLog()


@pytest.fixture
def page(browser: Any, page_log: PageLog, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh context and page (1440 x 1000); a screenshot of its last state is kept."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000}, device_scale_factor=1)
    p = context.new_page()
    p.on("console", lambda m: page_log.errors.append(m.text) if m.type == "error" else None)
    p.on("pageerror", lambda e: page_log.errors.append(f"uncaught: {e}"))
    p.on("request", lambda r: page_log.requests.append(r.url))
    try:
        yield p
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        try:
            p.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        finally:
            context.close()


class SyncApi:
    """A blocking client of one server (browser tests are synchronous)."""

    def __init__(self, base_url: str, token: str = BOOTSTRAP) -> None:
        self.base_url = base_url
        self.http = httpx.Client(base_url=base_url, headers={"authorization": f"Bearer {token}"}, timeout=30.0)

    def command(self, body: dict[str, Any]) -> httpx.Response:
        return self.http.post("/v1/commands", json=body)

    def ok(self, body: dict[str, Any]) -> dict[str, Any]:
        r = self.command(body)
        assert r.status_code == 200, r.text
        payload: dict[str, Any] = r.json()
        assert payload["ok"] is True, r.text
        out: dict[str, Any] = payload
        return out

    def refused(self, body: dict[str, Any], code: str) -> dict[str, Any]:
        r = self.command(body)
        assert r.status_code >= 400 and r.json()["error"]["code"] == code, r.text
        err: dict[str, Any] = r.json()["error"]
        return err

    def register(self, actor: str, **fields: Any) -> str:
        sid: str = self.ok({"type": "register_agent", "actor": actor, **fields})["result"]["session_id"]
        return sid

    def reader_token(self) -> str:
        token: str = self.ok({"type": "issue_token", "role": "reader"})["result"]["token"]
        return token

    def close(self) -> None:
        self.http.close()


def snapshot(page: Any, request: pytest.FixtureRequest, label: str) -> None:
    """Keep a screenshot of the page now, beside the test's final one."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    page.screenshot(path=str(ARTIFACTS / f"{name}-{label}.png"), full_page=True)


def sign_in(page: Any, base_url: str, token: str) -> None:
    """Open /ui, answer the token prompt, wait until every view has painted."""
    page.goto(base_url + "/ui")
    page.locator("#login-token").fill(token)
    page.locator("#login-form button[type=submit]").click()
    page.wait_for_selector("body[data-ready='1']", timeout=15_000)
