"""What the mirror remembers, kept as messages on its own channel in the eventcoord log.

Each record is one message whose body is a JSON object tagged by ``op``: a label or assignee
the mirror added (``added``) or took back (``removed``), a conflict it reported
(``noted``), a takeover it commented on (``audited``), how far it has read the log
(``passed``). The memory is the fold of the records in log order; only records posted
without a session by a human or admin token count, so an agent cannot write into it.
Each record carries ``seq`` (the previous record's plus one) and is posted with a
``command_id`` made of it: a repeated post changes nothing, and two syncs racing for one
``seq`` are told apart (``IDEMPOTENCY_MISMATCH``, or ``FORBIDDEN`` from another token).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import msgspec

#: Who may write the memory: sessionless posts of these tokens' roles.
TRUSTED_POSTERS = frozenset({"token:admin", "token:human"})


class Record(msgspec.Struct, frozen=True, kw_only=True, tag_field="op", omit_defaults=True):
    """Base of every record; ``seq`` orders them and names their ``command_id``."""

    seq: int


class Added(Record, frozen=True, kw_only=True, tag="added"):
    """The mirror put ``label`` or ``assignee`` on issue ``n`` (recorded before the write)."""

    n: int
    label: str | None = None
    assignee: str | None = None


class Removed(Record, frozen=True, kw_only=True, tag="removed"):
    """What the mirror had added to issue ``n`` is gone (recorded after the write)."""

    n: int
    label: str | None = None
    assignee: str | None = None


class Noted(Record, frozen=True, kw_only=True, tag="noted"):
    """A conflict was told to the holding agent and commented on issue ``n``."""

    n: int
    issue: str
    session_id: str
    fencing_token: int
    login: str


class Audited(Record, frozen=True, kw_only=True, tag="audited"):
    """The lease that ended at ``position`` got its comment on issue ``n``."""

    position: int
    n: int


class Passed(Record, frozen=True, kw_only=True, tag="passed"):
    """Every ended lease up to ``position`` has been handled."""

    position: int


AnyRecord = Added | Removed | Noted | Audited | Passed
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyRecord)

Conflict = tuple[int, str, str, int, str]  # (n, issue, session_id, fencing_token, login)


@dataclass(frozen=True)
class Memory:
    """The fold of the records: what the mirror owns on GitHub and how far it has come."""

    labels: frozenset[tuple[int, str]] = frozenset()
    assignees: frozenset[tuple[int, str]] = frozenset()
    noted: frozenset[Conflict] = frozenset()
    cursor: int = 0
    seq: int = 0
    #: The position of the last message read (where the next read starts).
    read_to: int = 0

    def owns_label(self, n: int, label: str) -> bool:
        """The mirror added ``label`` to issue ``n`` (and has not taken it back)."""
        return (n, label) in self.labels

    def owns_assignee(self, n: int, login: str) -> bool:
        """The mirror assigned ``login`` to issue ``n`` (and has not taken it back)."""
        return (n, login) in self.assignees


def encode(record: Record) -> str:
    """A record as a message body."""
    return _encoder.encode(record).decode()


def decode(body: str) -> AnyRecord | None:
    """A message body as a record; None for anything else on the channel."""
    try:
        return _decoder.decode(body)
    except msgspec.DecodeError:
        return None


def trusted(session_id: str | None, actor_key: str | None) -> bool:
    """A message the mirror itself could have posted."""
    return session_id is None and actor_key in TRUSTED_POSTERS


def command_id(channel: str, seq: int) -> str:
    """The idempotency key of the record ``seq`` on ``channel``."""
    return f"github-mirror:{hashlib.sha256(channel.encode()).hexdigest()[:16]}:{seq}"


def apply(memory: Memory, record: AnyRecord, position: int = 0) -> Memory:
    """The memory after one more record."""
    labels, assignees, noted, cursor = set(memory.labels), set(memory.assignees), set(memory.noted), memory.cursor
    match record:
        case Added(n=n, label=label, assignee=assignee):
            if label is not None:
                labels.add((n, label))
            if assignee is not None:
                assignees.add((n, assignee))
        case Removed(n=n, label=label, assignee=assignee):
            labels.discard((n, label or ""))
            assignees.discard((n, assignee or ""))
        case Noted(n=n, issue=issue, session_id=sid, fencing_token=token, login=login):
            noted.add((n, issue, sid, token, login))
        case Audited(position=p) | Passed(position=p):
            cursor = max(cursor, p)
    return Memory(
        labels=frozenset(labels),
        assignees=frozenset(assignees),
        noted=frozenset(noted),
        cursor=cursor,
        seq=max(memory.seq, record.seq),
        read_to=max(memory.read_to, position),
    )


def fold(records: Iterable[AnyRecord], start: Memory | None = None) -> Memory:
    """The memory the records leave, in order."""
    memory = start or Memory()
    for record in records:
        memory = apply(memory, record)
    return memory
