"""Read routes of the stream tier."""

from __future__ import annotations

from typing import Any

ROUTES: list[Any] = []
