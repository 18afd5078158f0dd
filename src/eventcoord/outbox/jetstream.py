"""The JetStream side of the relay: the stream's shape, its binding to one store, its tail.

A stream is bound to the store whose events it carries (metadata ``eventcoord_store_id``,
docs/protocol.md#nats); the relay never writes into a stream bound to another store.
"""

from __future__ import annotations

import dataclasses
import logging

import msgspec
import nats.js.errors
from nats.js import JetStreamContext, api

from eventcoord.codec import WireEvent

log = logging.getLogger("eventcoord.outbox.relay")

#: Stream metadata key naming the store a stream belongs to (docs/protocol.md#nats).
STORE_ID_KEY = "eventcoord_store_id"
#: NATS is a delivery channel, not the archive: the store keeps every event forever and
#: ``/v1/events`` replays any range, so the stream keeps a week, at most 1 GiB.
DEFAULT_MAX_AGE = 7 * 24 * 3600.0
DEFAULT_MAX_BYTES = 1 << 30
#: Longer than any relay failover (lease expiry + reconnect), so a re-publish after a
#: takeover is still recognised by the broker.
DEFAULT_DUPLICATE_WINDOW = 300.0
# JetStream error codes: "wrong last sequence" (a publish lost a race for the stream's tail)
# and "stream name already in use" (another replica created the stream first).
WRONG_LAST_SEQUENCE = 10071
_STREAM_NAME_IN_USE = 10058
# How far back resync looks past messages without a position (foreign or deleted ones).
_SCAN_BACK = 64


class StreamRefused(Exception):
    """The stream belongs to another store (or is unbound and not empty)."""


class _Meta(msgspec.Struct):
    workspace: str = "_"


_meta_decoder = msgspec.json.Decoder(_Meta)
_TOKEN_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def subject_token(name: str) -> str:
    """``name`` as one NATS subject token, injectively.

    A valid workspace name (``[A-Za-z0-9_-]{1,64}``, docs/protocol.md#names) is its own token; any other
    character is written ``%XX`` per UTF-8 byte (``%`` itself too), and the empty name is
    ``%``. Valid names never hold ``%``, so two different names never share a subject:
    ``"evil\n"`` → ``evil%0A``, ``"evil_"`` → ``evil_``.
    """
    if not name:
        return "%"
    if all(c in _TOKEN_SAFE for c in name):
        return name
    return "".join(
        c if c in _TOKEN_SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass")) for c in name
    )


def token_name(token: str) -> str:
    """The name :func:`subject_token` wrote as ``token`` (its inverse)."""
    if token == "%":
        return ""
    out = bytearray()
    i = 0
    while i < len(token):
        if token[i] == "%":
            out.append(int(token[i + 1 : i + 3], 16))
            i += 3
        else:
            out += token[i].encode()
            i += 1
    return out.decode("utf-8", "surrogatepass")


def subject_of(ev: WireEvent) -> str:
    """``eventcoord.<workspace>.<type>`` for an event (docs/protocol.md#nats).

    Workspace names are validated token-safe, but a store may hold a name from
    before that check; such a name is encoded (:func:`subject_token`), never merged into
    another workspace's subject and never left to stall the relay.
    """
    ws = _meta_decoder.decode(ev.metadata).workspace
    return f"eventcoord.{subject_token(ws)}.{subject_token(ev.type)}"


def stream_config(name: str, max_age: float, max_bytes: int, duplicate_window: float) -> api.StreamConfig:
    """The stream every relay creates when it is missing: all of ``eventcoord.>``, on disk."""
    return api.StreamConfig(
        name=name,
        subjects=["eventcoord.>"],
        storage=api.StorageType.FILE,
        retention=api.RetentionPolicy.LIMITS,
        discard=api.DiscardPolicy.OLD,
        max_age=max_age,
        max_bytes=max_bytes,
        duplicate_window=max(duplicate_window, 120.0),
    )


async def ensure_stream(js: JetStreamContext, name: str, config: api.StreamConfig, store_id: str) -> api.StreamInfo:
    """Stream ``name``, created from ``config`` bound to ``store_id`` if missing; StreamRefused if it is not ours."""
    try:
        info = await js.stream_info(name)
    except nats.js.errors.NotFoundError:
        try:
            info = await js.add_stream(dataclasses.replace(config, metadata={STORE_ID_KEY: store_id}))
            log.info("relay: created JetStream stream %s bound to store %s", name, store_id)
        except nats.js.errors.BadRequestError as e:
            if e.err_code != _STREAM_NAME_IN_USE:
                raise
            info = await js.stream_info(name)
    metadata = info.config.metadata or {}
    bound = metadata.get(STORE_ID_KEY)
    if bound == store_id:
        return info
    if bound is None and info.state.messages == 0 and info.state.last_seq == 0:
        # Created empty by an operator (say, with cluster replicas): adopt it.
        adopted = info.config
        adopted.metadata = {k: v for k, v in metadata.items() if not k.startswith("_nats")}
        adopted.metadata[STORE_ID_KEY] = store_id
        return await js.update_stream(adopted)
    if bound is None:
        raise StreamRefused(f"stream {name} is not empty and not bound to any store")
    raise StreamRefused(f"stream {name} is bound to store {bound}, this store is {store_id}")


async def last_position(js: JetStreamContext, stream_name: str, state: api.StreamState) -> int:
    """The ``Nats-Msg-Id`` (= position) of the newest message that carries one."""
    seq = state.last_seq
    floor = max(state.first_seq, seq - _SCAN_BACK)
    while seq >= floor and seq > 0 and state.messages > 0:
        try:
            msg = await js.get_msg(stream_name, seq=seq)
        except nats.js.errors.NotFoundError:  # deleted, or aged out meanwhile
            seq -= 1
            continue
        msg_id = (msg.headers or {}).get("Nats-Msg-Id", "")
        if msg_id.isdigit():
            return int(msg_id)
        seq -= 1
    return 0
