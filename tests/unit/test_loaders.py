"""Loaders: the plain body unless the connection carries a substitute for it.

A backend registers its version of a loader with ``@substitute``; only a connection that
carries the table (``conn.info[LOADERS]``) runs it, and the substitute may fall back to the
plain body. Run on a real SQLite connection.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, create_engine, text

from eventcoord.store import loaders
from eventcoord.store.loaders import LOADERS, SUBSTITUTES, loader, substitute


@loader
def answer(conn: Connection, base: int, *, plus: int = 0) -> tuple[str, int]:
    """Reads ``base + plus`` from the database: the plain body."""
    return "plain", int(conn.execute(text("SELECT :b + :p"), {"b": base, "p": plus}).scalar_one())


@pytest.fixture
def conn() -> Iterator[Connection]:
    engine = create_engine("sqlite://")
    with engine.connect() as c:
        yield c
    engine.dispose()


@pytest.fixture
def registered() -> Iterator[None]:
    """Registers a substitute of ``answer`` for one test and takes it out again."""

    @substitute(answer)
    def from_batch(conn: Connection, base: int, *, plus: int = 0) -> tuple[str, int]:
        if base < 0:  # nothing read ahead for it: the plain body
            return answer.plain(conn, base, plus=plus)
        return "substitute", base + plus

    assert SUBSTITUTES[answer.plain] is from_batch
    yield
    del SUBSTITUTES[answer.plain]


def test_a_loader_runs_its_plain_body_on_a_connection_without_substitutes(conn: Connection, registered: None) -> None:
    assert LOADERS not in conn.info
    assert answer(conn, 2, plus=3) == ("plain", 5)
    assert answer.plain(conn, 2) == ("plain", 2)
    assert answer.__name__ == "answer" and answer.__doc__ and "plain body" in answer.__doc__


def test_a_connection_carrying_the_table_runs_the_substitute(conn: Connection, registered: None) -> None:
    conn.info[LOADERS] = SUBSTITUTES
    assert answer(conn, 2, plus=3) == ("substitute", 5)
    assert answer(conn, -2, plus=3) == ("plain", 1)  # its fallback runs the plain body, once
    assert answer.plain(conn, 2) == ("plain", 2)  # the plain body is never replaced


def test_a_table_without_the_loader_runs_its_plain_body(conn: Connection) -> None:
    assert answer.plain not in SUBSTITUTES
    conn.info[LOADERS] = SUBSTITUTES
    assert answer(conn, 4) == ("plain", 4)
    conn.info[LOADERS] = {answer.plain: lambda c, base, plus=0: ("other", base)}
    assert answer(conn, 4) == ("other", 4)


def test_the_registry_is_the_module_s_one_table() -> None:
    assert loaders.SUBSTITUTES is SUBSTITUTES
