"""Read model of the messages tier (kept current by apply functions below)."""

from __future__ import annotations

from .base import Appliers

APPLIERS: Appliers = {}
