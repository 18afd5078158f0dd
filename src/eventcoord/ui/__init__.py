"""The web dashboard served at ``/ui`` (docs/dashboard.md): static files shipped in the package.

``static/`` holds plain HTML, CSS and JavaScript modules — no build step, no CDN; the
page talks only to the server that served it (its Content-Security-Policy says so).
:mod:`eventcoord.ui.routes` serves them.
"""
