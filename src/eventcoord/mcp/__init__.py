"""``eventcoord mcp``: the MCP server, a thin client of a running eventcoord (see ``server``)."""
