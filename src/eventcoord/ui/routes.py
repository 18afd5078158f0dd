"""``GET /ui`` and ``GET /ui/<asset>``: the dashboard's files, straight from the package.

The files are read once from ``eventcoord/ui/static`` (package data, so an installed wheel
serves them too) and answered with an ETag. Only files that exist there are served — a
name is looked up in that fixed table, never joined onto a filesystem path. No token is
needed for the files themselves: they hold no data; the page asks for a token and sends
it in the ``Authorization`` header of its own API calls.

Every answer carries a Content-Security-Policy that lets the page load and connect only
to this origin, so no request can leave the machine from it.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from litestar import Request, Response, get

from eventcoord.errors import DomainError

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8",
}

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


class Asset:
    """One static file: its bytes, media type and a strong ETag."""

    __slots__ = ("body", "etag", "media_type")

    def __init__(self, body: bytes, media_type: str) -> None:
        self.body = body
        self.media_type = media_type
        self.etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


_ASSETS: dict[str, Asset] = {}


def _walk(folder: Traversable, prefix: str, out: dict[str, Asset]) -> None:
    for entry in folder.iterdir():
        name = prefix + entry.name
        if entry.is_dir():
            _walk(entry, name + "/", out)
            continue
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        media_type = CONTENT_TYPES.get(suffix)
        if media_type is not None:
            out[name] = Asset(entry.read_bytes(), media_type)


def assets() -> dict[str, Asset]:
    """Every servable file under ``static/``, keyed by its relative path (loaded once)."""
    if not _ASSETS:
        found: dict[str, Asset] = {}
        _walk(resources.files("eventcoord.ui").joinpath("static"), "", found)
        _ASSETS.update(found)
    return _ASSETS


def _answer(request: Request[Any, Any, Any], name: str) -> Response[bytes]:
    asset = assets().get(name)
    if asset is None:
        raise DomainError("NOT_FOUND", f"no dashboard file {name!r}", {"path": name})
    # no-cache = revalidate every time: an upgraded server never runs a stale page.
    headers = {**SECURITY_HEADERS, "etag": asset.etag, "cache-control": "no-cache"}
    if request.headers.get("if-none-match") == asset.etag:
        return Response(b"", status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


@get(["/ui", "/ui/"], include_in_schema=False, exclude_from_auth=True)
async def ui_index(request: Request[Any, Any, Any]) -> Response[bytes]:
    """The dashboard page."""
    return _answer(request, "index.html")


@get("/ui/{asset:path}", include_in_schema=False, exclude_from_auth=True)
async def ui_asset(request: Request[Any, Any, Any], asset: str) -> Response[bytes]:
    """A file of the dashboard (``/ui/js/app.js``, ``/ui/style.css``, …)."""
    return _answer(request, asset.lstrip("/"))


ROUTES = [ui_index, ui_asset]
