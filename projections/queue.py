"""Read model of the queue tier (kept current by apply functions below)."""

from __future__ import annotations

from .base import Appliers

APPLIERS: Appliers = {}
