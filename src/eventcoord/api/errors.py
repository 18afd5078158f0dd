"""One mapping from exceptions to the error envelope: a stable code, never a stack trace."""

from __future__ import annotations

import logging
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, ValidationException

from eventcoord.errors import ConcurrencyError, DomainError, StoreError
from eventcoord.service import error_body

log = logging.getLogger("eventcoord.api")

_HTTP_CODES = {
    400: "VALIDATION",
    401: "UNAUTHENTICATED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    415: "VALIDATION",
    429: "TOO_MANY_REQUESTS",
}


def envelope(e: DomainError) -> Response[bytes]:
    """The error envelope for a DomainError."""
    return Response(error_body(e), status_code=e.status, media_type=MediaType.JSON)


def domain_error(_: Request[Any, Any, Any], e: DomainError) -> Response[bytes]:
    return envelope(e)


def concurrency_error(_: Request[Any, Any, Any], e: ConcurrencyError) -> Response[bytes]:
    return envelope(DomainError("CONCURRENCY", "the command lost a race too many times; it is safe to retry"))


def validation_error(_: Request[Any, Any, Any], e: ValidationException) -> Response[bytes]:
    field = "query"
    extra: Any = e.extra
    if isinstance(extra, list) and extra and isinstance(extra[0], dict):
        field = str(extra[0].get("key") or field)
    return envelope(DomainError("VALIDATION", f"invalid {field}: {e.detail}", {"field": field}))


def http_error(_: Request[Any, Any, Any], e: HTTPException) -> Response[bytes]:
    code = _HTTP_CODES.get(e.status_code, "ERROR" if e.status_code < 500 else "INTERNAL")
    status = 422 if code == "VALIDATION" else e.status_code
    if e.status_code == 413:
        return envelope(DomainError("PAYLOAD_TOO_LARGE", "request body exceeds 1 MiB"))
    return Response(
        error_body(DomainError(code, str(e.detail))), status_code=status, media_type=MediaType.JSON
    )


def internal_error(request: Request[Any, Any, Any], e: Exception) -> Response[bytes]:
    # The one place a surprise is logged in full; the client gets no stack trace.
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    code = "STORE_UNAVAILABLE" if isinstance(e, StoreError) else "INTERNAL"
    return Response(error_body(DomainError(code, "internal error")), status_code=503 if code == "STORE_UNAVAILABLE" else 500, media_type=MediaType.JSON)


EXCEPTION_HANDLERS: dict[Any, Any] = {
    DomainError: domain_error,
    ConcurrencyError: concurrency_error,
    ValidationException: validation_error,
    HTTPException: http_error,
    Exception: internal_error,
}
