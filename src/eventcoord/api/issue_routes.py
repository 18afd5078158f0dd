"""Read routes of the issue tier."""

from __future__ import annotations

from typing import Any

ROUTES: list[Any] = []
