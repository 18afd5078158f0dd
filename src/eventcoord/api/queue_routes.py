"""Read routes of the queue tier."""

from __future__ import annotations

from typing import Any

ROUTES: list[Any] = []
