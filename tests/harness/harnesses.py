"""The real Claude Code and Codex CLIs: installed from npm into a cache, run offline.

``install()`` puts the versions pinned in ``package-lock.json`` beside this file into
``$EVENTCOORD_HARNESS_CACHE`` (default ``~/.cache/eventcoord/harnesses``), once per lock
file; later runs reuse it. ``ClaudeCode`` and ``Codex`` run one non-interactive session
against a scripted model server, with a home directory of their own and the flags the
harnesses need to run hooks unattended.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.model_servers import MessagesServer, ResponsesServer

HERE = Path(__file__).resolve().parent
LOCK = HERE / "package-lock.json"
#: The test environment's ``eventcoord`` and ``python``: first on the harness's PATH.
VENV_BIN = Path(sys.executable).parent


def cache_root() -> Path:
    return Path(os.environ.get("EVENTCOORD_HARNESS_CACHE") or Path.home() / ".cache" / "eventcoord" / "harnesses")


@dataclass(frozen=True)
class Installed:
    """Where the installed harnesses' executables are."""

    claude: Path
    codex: Path


def _native_claude(modules: Path) -> Path:
    # npm ci runs with --ignore-scripts, so the package's own bin is still the stub its
    # postinstall would replace: run the platform package's binary, which that step copies.
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}[platform.machine().lower()]
    return modules / "@anthropic-ai" / f"claude-code-{sys.platform}-{machine}" / "claude"


def install() -> Installed:
    """The pinned harnesses, installed with ``npm ci`` unless the cache already has them.

    Raises when node or npm is missing or the install fails: these tests run everywhere.
    """
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not on PATH: the real-harness tests need Node.js and npm")
    root = cache_root()
    key = hashlib.sha256(LOCK.read_bytes() + (HERE / "package.json").read_bytes()).hexdigest()[:16]
    target = root / key
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # pytest-xdist workers install once between them
        if not (target / ".installed").exists():
            for stale in root.glob(".install-*"):  # left by an install that was killed
                shutil.rmtree(stale, ignore_errors=True)
            staging = Path(tempfile.mkdtemp(prefix=".install-", dir=root))
            try:
                for name in ("package.json", "package-lock.json"):
                    shutil.copy(HERE / name, staging / name)
                done = subprocess.run(
                    ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                    cwd=staging,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                if done.returncode != 0:
                    raise RuntimeError(f"npm ci failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
                (staging / ".installed").write_text(key)
                if target.exists():
                    shutil.rmtree(target)
                staging.rename(target)
            finally:
                if staging.exists():
                    shutil.rmtree(staging, ignore_errors=True)
    modules = target / "node_modules"
    installed = Installed(claude=_native_claude(modules), codex=modules / ".bin" / "codex")
    for exe in (installed.claude, installed.codex):
        if not os.access(exe, os.X_OK):
            raise RuntimeError(f"{exe} is missing after the install; remove {target} and run again")
    return installed


@dataclass
class Run:
    """One finished harness process."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    #: The harness's own session id (the ``session_id`` of every hook payload).
    session_id: str | None

    def explain(self) -> str:
        return f"exit {self.returncode} after {self.seconds:.1f}s\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


def _environment(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    # A clean environment: nothing of the developer's own harness set-up (keys, config dirs)
    # leaks in; PATH starts with this test run's eventcoord.
    path = os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "/usr/bin:/bin")])
    return {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", **extra}


def _run(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
    )
    return done, time.monotonic() - started


class ClaudeCode:
    """``claude -p`` against a Messages API stand-in; project hooks load with no prompt."""

    name = "claude"

    def __init__(self, executable: Path, home: Path) -> None:
        self.executable = executable
        self.home = home
        home.mkdir(parents=True, exist_ok=True)

    def run(
        self,
        repo: Path,
        model: MessagesServer,
        prompt: str,
        env: Mapping[str, str] = {},
        timeout: float = 60,
        mcp: bool = False,
        allowed_tools: tuple[str, ...] = (),
    ) -> Run:
        """One ``claude -p`` session in ``repo``. ``mcp``: start the project's MCP servers
        (``.mcp.json``) too; off, it skips them (``eventcoord mcp`` takes seconds to start
        and stop on a busy machine, and only the test of the MCP set-up needs it).
        ``allowed_tools``: tools it may call unasked besides file edits (an MCP tool, say)."""
        environment = _environment(
            self.home,
            {
                "ANTHROPIC_BASE_URL": model.url,
                "ANTHROPIC_API_KEY": "stand-in",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_ERROR_REPORTING": "1",
                **env,
            },
        )
        argv = [str(self.executable), "-p", prompt, "--output-format", "json", "--permission-mode", "acceptEdits"]
        if not mcp:
            argv.append("--strict-mcp-config")
        if allowed_tools:
            argv += ["--allowedTools", ",".join(allowed_tools)]
        done, seconds = _run(argv, repo, environment, timeout)
        session_id = None
        with contextlib.suppress(ValueError):
            session_id = json.loads(done.stdout).get("session_id")
        return Run(done.returncode, done.stdout, done.stderr, seconds, session_id)


class Codex:
    """``codex exec`` against a Responses API stand-in, the repository trusted, hooks run."""

    name = "codex"

    def __init__(self, executable: Path, home: Path) -> None:
        self.executable = executable
        self.home = home
        home.mkdir(parents=True, exist_ok=True)

    def configure(self, repo: Path, model: ResponsesServer) -> None:
        # A model name Codex knows (else it offers no apply_patch tool); the project trusted
        # (else .codex/hooks.json is not even read).
        (self.home / "config.toml").write_text(
            'model = "gpt-5.5"\n'
            'model_provider = "local"\n'
            "check_for_update_on_startup = false\n"
            "[model_providers.local]\n"
            'name = "local"\n'
            f'base_url = "{model.url}/v1"\n'
            'env_key = "LOCAL_API_KEY"\n'
            'wire_api = "responses"\n'
            "[analytics]\n"
            "enabled = false\n"
            "[features]\n"
            "plugins = false\n"
            "remote_plugin = false\n"
            f"[projects.{json.dumps(str(repo.resolve()))}]\n"
            'trust_level = "trusted"\n'
        )

    def run(
        self,
        repo: Path,
        model: ResponsesServer,
        prompt: str,
        env: Mapping[str, str] = {},
        timeout: float = 60,
        trust_hooks: bool = True,
        sandbox: str = "workspace-write",
    ) -> Run:
        """One ``codex exec`` in ``repo``. ``sandbox``: how its commands run (``workspace-write``
        keeps ``.git`` read-only and the network off; ``danger-full-access`` lets them commit)."""
        self.configure(repo, model)
        environment = _environment(self.home, {"CODEX_HOME": str(self.home), "LOCAL_API_KEY": "stand-in", **env})
        bypass = ["--dangerously-bypass-hook-trust"] if trust_hooks else []
        argv = [str(self.executable), "exec", "--json", "--sandbox", sandbox, *bypass, prompt]
        done, seconds = _run(argv, repo, environment, timeout)
        session_id = None
        for line in done.stdout.splitlines():
            with contextlib.suppress(ValueError):
                event: dict[str, Any] = json.loads(line)
                if event.get("type") == "thread.started":
                    session_id = event.get("thread_id")
        return Run(done.returncode, done.stdout, done.stderr, seconds, session_id)
