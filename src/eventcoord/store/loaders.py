"""Loaders: the read layer's functions, which a backend may replace for one transaction.

A loader (``@loader``) reads the state a decision needs: ``f(conn, ctx, ...)`` returns a
typed state. Called, it runs the substitute the running transaction installed for it on
its connection (``conn.info[LOADERS]``, plain body -> substitute), else its plain body
(``f.plain``). A backend registers its versions with ``@substitute(f)`` in ``SUBSTITUTES``
and installs that table on the connections it batches on: PostgreSQL builds the same
state from the rows its batch read ahead; SQLite installs nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from sqlalchemy import Connection

P = ParamSpec("P")
R = TypeVar("R")

#: Where a transaction installs its substitutes on its connection.
LOADERS = "eventcoord.loaders"
#: A backend's substitutes, by the plain body they replace (``@substitute``).
SUBSTITUTES: dict[Callable[..., Any], Callable[..., Any]] = {}


class Loader(Generic[P, R]):
    """A read-layer function: its plain body, or the substitute its connection carries."""

    def __init__(self, plain: Callable[Concatenate[Connection, P], R]) -> None:
        #: The plain body: plain SQL, which every backend can run.
        self.plain = plain
        functools.update_wrapper(self, plain)

    def __call__(self, conn: Connection, /, *args: P.args, **kwargs: P.kwargs) -> R:
        table: dict[Callable[..., Any], Callable[..., Any]] | None = conn.info.get(LOADERS)
        if table:
            replacement = table.get(self.plain)
            if replacement is not None:
                result: R = replacement(conn, *args, **kwargs)
                return result
        return self.plain(conn, *args, **kwargs)


def loader(plain: Callable[Concatenate[Connection, P], R]) -> Loader[P, R]:
    """Make ``plain`` a loader (see the module's docstring)."""
    return Loader(plain)


def substitute(
    of: Loader[P, R],
) -> Callable[[Callable[Concatenate[Connection, P], R]], Callable[Concatenate[Connection, P], R]]:
    """Register the decorated function as the backend's version of loader ``of``.

    It takes the same arguments and must return the same state the plain body would; where
    it has nothing better, it calls ``of.plain`` (not ``of``, which would call it again).
    """

    def register(fn: Callable[Concatenate[Connection, P], R]) -> Callable[Concatenate[Connection, P], R]:
        SUBSTITUTES[of.plain] = fn
        return fn

    return register
