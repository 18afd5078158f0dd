"""What a projection is: tables plus ``apply`` functions keyed by event class.

Inline projections run inside the command's transaction, so they are never behind the
log; ``rebuild`` replays the whole log through the same functions.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection

from eventcoord.events import Event
from eventcoord.store.log import RecordedEvent

Applier = Callable[[Connection, RecordedEvent], None]
Appliers = dict[type[Event], Applier]
