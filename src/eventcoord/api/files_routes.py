"""Read routes of the files tier."""

from __future__ import annotations

from typing import Any

ROUTES: list[Any] = []
