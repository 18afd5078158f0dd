"""Read-layer loaders a backend may substitute: the plain body, or its own version of it.

A ``@loader`` function runs the substitute the running transaction installed for it
(``conn.info["eventcoord.loaders"]``), else its plain body (``f.plain``). A backend
registers its versions with ``@substitute(plain)`` in ``SUBSTITUTES``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from sqlalchemy import Connection

P = ParamSpec("P")
T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

#: Where a transaction keeps the substitutes it runs (plain loader -> its substitute).
INFO_KEY = "eventcoord.loaders"


class Loader(Protocol[P, T_co]):
    """A read-layer function with its plain body at hand."""

    @property
    def plain(self) -> Callable[P, T_co]:
        """The plain body."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> T_co: ...


#: Every registered substitute, by the loader it stands in for.
SUBSTITUTES: dict[Callable[..., Any], Callable[..., Any]] = {}


def loader(f: Callable[P, T]) -> Loader[P, T]:
    """``f(conn, …)`` as a loader: the running transaction's substitute for it, else ``f``."""

    @functools.wraps(f)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        conn = cast(Connection, args[0])
        table = conn.info.get(INFO_KEY)
        chosen = table.get(run) if table else None
        return cast(T, (chosen or f)(*args, **kwargs))

    run.plain = f  # type: ignore[attr-defined]
    return cast(Loader[P, T], run)


def substitute(plain: Callable[..., Any]) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Register the decorated function as a backend's version of the loader ``plain``."""

    def register(f: Callable[P, T]) -> Callable[P, T]:
        SUBSTITUTES[plain] = f
        return f

    return register
