"""The MCP server (`tiermem mcp`): the server and its registry of tools.

Importing this package imports the `mcp` SDK; nothing else in `tiermem.tui` does at import.
"""

from tiermem.tui.mcp.server import build_server, serve, tool_list, tools_markdown

__all__ = ["build_server", "serve", "tool_list", "tools_markdown"]
