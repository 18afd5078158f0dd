"""Configuration in one place: flags and EVENTCOORD_* environment variables, validated."""

from __future__ import annotations

import os
from dataclasses import dataclass


class ConfigError(ValueError):
    """A setting that cannot work; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything ``eventcoord serve`` needs to know."""

    data_dir: str = ".eventcoord"
    db_url: str = ""
    nats: str = "embedded"
    nats_stream: str = "EVENTCOORD"
    host: str = "127.0.0.1"
    port: int = 8765
    ttl_seconds: int | None = None
    bootstrap_token: str | None = None
    #: Seconds between ``: keep-alive`` comments on a quiet Server-Sent Events stream.
    sse_keepalive_seconds: float = 15.0
    #: Rate limits (per process): requests per second and burst per token, per client
    #: address, and failed authentications per address; a rate of 0 turns that limit off.
    rate_token_per_second: float = 100.0
    rate_token_burst: float = 2000.0
    rate_address_per_second: float = 1000.0
    rate_address_burst: float = 4000.0
    rate_auth_failures_per_second: float = 1.0
    rate_auth_failures_burst: float = 20.0
    #: A snapshot of the read models every this many events (0: none), for ``as_of`` reads.
    snapshot_every: int = 5000
    #: Seconds a request's headers may take from its first byte, and its body from its
    #: headers, before the server answers 408 and closes the connection (api/read_deadlines.py).
    header_timeout_seconds: float = 10.0
    body_timeout_seconds: float = 30.0

    @property
    def database_url(self) -> str:
        """The SQLAlchemy URL, defaulting to SQLite under the data folder."""
        return self.db_url or f"sqlite+aiosqlite:///{os.path.abspath(self.data_dir)}/eventcoord.db"

    def validate(self) -> Settings:
        """Raise ConfigError for settings that cannot work."""
        url = self.database_url
        if not (url.startswith("sqlite") or url.startswith("postgresql")):
            raise ConfigError(
                f"--db / EVENTCOORD_DB_URL must be sqlite+aiosqlite:///… or postgresql+asyncpg://…, got {url!r}"
            )
        if not (self.nats in ("embedded", "off") or self.nats.startswith(("nats://", "tls://"))):
            raise ConfigError(
                f"--nats / EVENTCOORD_NATS_URL must be 'embedded', 'off' or a nats:// URL, got {self.nats!r}"
            )
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port / EVENTCOORD_PORT must be 0..65535, got {self.port}")
        if self.ttl_seconds is not None and not 1 <= self.ttl_seconds <= 86400:
            raise ConfigError(f"--ttl-seconds / EVENTCOORD_TTL_SECONDS must be 1..86400, got {self.ttl_seconds}")
        if not 0.01 <= self.sse_keepalive_seconds <= 3600:
            raise ConfigError(f"EVENTCOORD_SSE_KEEPALIVE_SECONDS must be 0.01..3600, got {self.sse_keepalive_seconds}")
        for name in RATE_SETTINGS:
            value = getattr(self, name)
            if not 0 <= value <= 1e9:
                raise ConfigError(f"EVENTCOORD_{name.upper()} must be 0..1e9, got {value}")
        for rate, burst in (
            ("rate_token_per_second", "rate_token_burst"),
            ("rate_address_per_second", "rate_address_burst"),
            ("rate_auth_failures_per_second", "rate_auth_failures_burst"),
        ):
            if getattr(self, rate) > 0 and getattr(self, burst) < 1:
                raise ConfigError(
                    f"EVENTCOORD_{burst.upper()} must be at least 1 while EVENTCOORD_{rate.upper()} is on"
                )
        for name in ("header_timeout_seconds", "body_timeout_seconds"):
            if not 0.1 <= getattr(self, name) <= 3600:
                raise ConfigError(f"EVENTCOORD_{name.upper()} must be 0.1..3600, got {getattr(self, name)}")
        if not 0 <= self.snapshot_every <= 10**9:
            raise ConfigError(
                f"--snapshot-every / EVENTCOORD_SNAPSHOT_EVERY must be 0..1000000000, got {self.snapshot_every}"
            )
        return self


#: The rate-limit settings, each read from ``EVENTCOORD_<NAME>`` (upper case).
RATE_SETTINGS = (
    "rate_token_per_second",
    "rate_token_burst",
    "rate_address_per_second",
    "rate_address_burst",
    "rate_auth_failures_per_second",
    "rate_auth_failures_burst",
)


def from_env(**overrides: object) -> Settings:
    """Settings from the environment, with explicit (flag) values taking precedence."""
    env = os.environ
    values: dict[str, object] = {
        "data_dir": env.get("EVENTCOORD_DATA_DIR", ".eventcoord"),
        "db_url": env.get("EVENTCOORD_DB_URL", ""),
        "nats": env.get("EVENTCOORD_NATS_URL", "embedded"),
        "nats_stream": env.get("EVENTCOORD_NATS_STREAM", "EVENTCOORD"),
        "host": env.get("EVENTCOORD_HOST", "127.0.0.1"),
        "port": _int_env("EVENTCOORD_PORT", 8765),
        "ttl_seconds": _int_env("EVENTCOORD_TTL_SECONDS", None),
        "bootstrap_token": env.get("EVENTCOORD_BOOTSTRAP_TOKEN") or None,
        "sse_keepalive_seconds": _float_env("EVENTCOORD_SSE_KEEPALIVE_SECONDS", 15.0),
        "snapshot_every": _int_env("EVENTCOORD_SNAPSHOT_EVERY", 5000),
        "header_timeout_seconds": _float_env("EVENTCOORD_HEADER_TIMEOUT_SECONDS", 10.0),
        "body_timeout_seconds": _float_env("EVENTCOORD_BODY_TIMEOUT_SECONDS", 30.0),
    }
    defaults = Settings()
    if env.get("EVENTCOORD_RATE_LIMITS", "").strip().lower() == "off":
        values.update({name: 0.0 for name in RATE_SETTINGS if name.endswith("per_second")})
    else:
        values.update(
            {name: _float_env(f"EVENTCOORD_{name.upper()}", getattr(defaults, name)) for name in RATE_SETTINGS}
        )
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**values).validate()  # type: ignore[arg-type]


def _int_env(name: str, default: int | None) -> int | None:
    """An integer environment variable; a value that is not one names the variable."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None


def _float_env(name: str, default: float) -> float:
    """A number from the environment; a value that is not one names the variable."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
