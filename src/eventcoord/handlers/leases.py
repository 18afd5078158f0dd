"""Handlers of the leases tier."""

from __future__ import annotations

from typing import Any

HANDLERS: dict[type, Any] = {}
