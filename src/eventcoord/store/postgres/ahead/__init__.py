"""PostgreSQL's reads ahead, a module per concept; importing the package registers the
substitutes of their loaders (``store/loaders.py``)."""

from __future__ import annotations

from eventcoord.store.loaders import SUBSTITUTES
from eventcoord.store.postgres.ahead import files, queue

__all__ = ["SUBSTITUTES", "files", "queue"]
