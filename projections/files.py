"""Read model of the files tier (kept current by apply functions below)."""

from __future__ import annotations

from .base import Appliers

APPLIERS: Appliers = {}
