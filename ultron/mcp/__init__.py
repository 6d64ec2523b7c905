"""Ultron as an MCP server: the memory, skill, context and feedback calls of the SDK as
MCP tools, and the current skills and the stats as MCP resources.

``build_server`` makes the server from a factory of :class:`ultron.sdk.Ultron` (called on
first use, so the handshake never waits on the database); ``run_stdio`` serves it over
stdin/stdout (``ultron mcp``); ``ultron.api.mcp_mount`` serves it over streamable HTTP
under ``/mcp`` of the HTTP API.
"""

from ultron.mcp.server import LazyUltron, build_server, run_stdio

__all__ = ["LazyUltron", "build_server", "run_stdio"]
