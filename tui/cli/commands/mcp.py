"""`tiermem mcp`: the MCP server on stdio, or with --tools-doc its tools as markdown."""

from __future__ import annotations

import click

from tiermem.core import hygiene
from tiermem.tui import mcp
from tiermem.tui.cli.options import Options, pass_options, session_option


@click.command(name="mcp")
@session_option
@click.option(
    "--tools-doc", is_flag=True, help="Print the tools and their schemas as markdown, then exit."
)
@pass_options
def mcp_cmd(opts: Options, session: str | None, tools_doc: bool) -> None:
    """Run the MCP server on stdio (for Claude Desktop, OpenClaw or any MCP client)."""
    if tools_doc:
        server, _ = mcp.build_server(opts.home, opts.agent_id, session)
        click.echo(mcp.tools_markdown(server), nl=False)
        return
    if session is not None:
        hygiene.check_session(session)
    mcp.serve(opts.home, opts.agent_id, session)
