"""One check of every request's parameters, before any route reads them.

Whatever a route declares, a query or path parameter never reaches the database unless it
can be stored there: a NUL character anywhere (PostgreSQL refuses it in text) or an integer
parameter outside the signed 64-bit range (both backends overflow) is 422 ``VALIDATION``
naming the parameter — never a 5xx. Routes keep their own, narrower, bounds.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from litestar import Request
from litestar.handlers import BaseRouteHandler
from litestar.params import ParameterKwarg

from eventcoord import errors

#: The range of a position, a limit or any other integer the stores keep (BIGINT).
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _is_int_field(annotation: Any) -> bool:
    args = getattr(annotation, "__args__", None)
    if args:  # int | None
        return any(a is int for a in args)
    return annotation is int


@functools.cache
def _int_params(handler: BaseRouteHandler) -> frozenset[str]:
    """The query names of ``handler``'s integer parameters."""
    names: set[str] = set()
    for name, field in handler.parsed_fn_signature.parameters.items():
        if not _is_int_field(field.annotation):
            continue
        kwarg = field.kwarg_definition
        query = kwarg.query if isinstance(kwarg, ParameterKwarg) else None
        names.add(query or name)
    return frozenset(names)


def in_range(value: str) -> bool:
    """``value`` is not an integer, or one a BIGINT holds."""
    v = value.strip()
    return not _INTEGER.fullmatch(v) or INT_MIN <= int(v) <= INT_MAX


def check(request: Request[Any, Any, Any]) -> None:
    """Refuse (422 ``VALIDATION``) a parameter no store could take; see the module."""
    for name, value in request.path_params.items():
        if isinstance(value, str) and "\x00" in value:
            raise errors.invalid(name, f"{name} holds a NUL character")
    if not request.scope["query_string"]:  # nothing to parse: every command, most reads
        return
    ints = _int_params(request.route_handler)
    for name, value in request.query_params.multi_items():
        if "\x00" in name or "\x00" in value:
            raise errors.invalid(name.replace("\x00", ""), f"query parameter {name!r} holds a NUL character")
        if name in ints and not in_range(value):
            raise errors.invalid(name, f"{name} must be an integer between {INT_MIN} and {INT_MAX}")


async def before_request(request: Request[Any, Any, Any]) -> None:
    """The app's ``before_request`` hook: :func:`check` every request."""
    check(request)
