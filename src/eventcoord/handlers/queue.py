"""Handlers of the queue tier."""

from __future__ import annotations

from typing import Any

HANDLERS: dict[type, Any] = {}
