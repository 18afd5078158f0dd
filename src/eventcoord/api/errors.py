"""One mapping from exceptions to the error envelope: a stable code, never a stack trace.

Refusals carry their code; the HTTP layer's own exceptions (unknown route, wrong method,
a body over 1 MiB, a bad query parameter) are given the code of their status; a lost
race is CONCURRENCY; a database we cannot reach is STORE_UNAVAILABLE (the store logs the
outage once, so no request logs it again); anything else is INTERNAL, logged in full here
and nowhere else.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException

from eventcoord import errors
from eventcoord.api.answers import error_response
from eventcoord.errors import ConcurrencyError, DomainError, StoreError, StoreUnavailable

log = logging.getLogger("eventcoord.api")

Req = Request[Any, Any, Any]


def _from_http(e: HTTPException) -> DomainError:
    """The refusal an exception of the HTTP layer stands for, by its status."""
    detail = str(e.detail)
    match e.status_code:
        case 401:
            return errors.unauthenticated(detail)
        case 403:
            return errors.forbidden(detail)
        case 404:
            return errors.not_found(detail)
        case 405:
            return errors.method_not_allowed(detail)
        case 413:
            return errors.payload_too_large()
        case 415:
            return errors.unsupported_media_type(detail)
        case 429:
            return errors.rate_limited(detail)
        case status if status >= 500:
            return errors.internal()
        case _:  # 400 and any other client error: the request is not acceptable as sent
            return errors.invalid_request(detail)


def domain_error(_: Req, e: DomainError) -> Response[bytes]:
    return error_response(e)


def concurrency_error(_: Req, e: ConcurrencyError) -> Response[bytes]:
    return error_response(errors.concurrency())


def validation_error(_: Req, e: ValidationException) -> Response[bytes]:
    field = "query"
    extra: Any = e.extra
    if isinstance(extra, list) and extra and isinstance(extra[0], dict):
        field = str(extra[0].get("key") or field)
    return error_response(errors.invalid(field, f"invalid {field}: {e.detail}"))


def http_error(_: Req, e: HTTPException) -> Response[bytes]:
    return error_response(_from_http(e))


def store_unavailable(_: Req, e: StoreUnavailable) -> Response[bytes]:
    # An outage, not a surprise: the store said so once in the log (store/outage.py).
    return error_response(errors.store_unavailable())


def internal_error(request: Req, e: Exception) -> Response[bytes]:
    # The one place a surprise is logged in full; the client gets no stack trace.
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(errors.store_unavailable() if isinstance(e, StoreError) else errors.internal())


EXCEPTION_HANDLERS: dict[Any, Any] = {
    DomainError: domain_error,
    ConcurrencyError: concurrency_error,
    StoreUnavailable: store_unavailable,
    ValidationException: validation_error,
    HTTPException: http_error,
    Exception: internal_error,
}
