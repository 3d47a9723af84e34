"""`tiermem serve`: the terminal UI in a web browser, on loopback unless --lan says otherwise."""

from __future__ import annotations

import importlib.util
import shlex
import socket
import sys
from typing import Any

import click

from tiermem.core.errors import InvalidInput, MissingExtra
from tiermem.core.llm import is_loopback
from tiermem.tui.cli.options import Options, pass_options

LOOPBACK = "127.0.0.1"


@click.command()
@click.option(
    "--host",
    default=None,
    help="Address to listen on (default 127.0.0.1; any other address needs --lan).",
)
@click.option(
    "--lan",
    is_flag=True,
    help="Listen beyond this machine (all interfaces unless --host) so a phone or tablet on "
    "your network can connect. There is no password: only on a network you trust.",
)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@pass_options
def serve(opts: Options, host: str | None, lan: bool, port: int) -> None:
    """Serve the terminal UI to a web browser (loopback only unless --lan)."""
    address = serve_address(host, lan)
    server = textual_serve_server()
    command = [sys.executable, "-m", "tiermem.tui", "--agent-id", opts.agent_id]
    if opts.home is not None:
        command[3:3] = ["--home", str(opts.home.expanduser().resolve())]
    public = lan_address() if address == "0.0.0.0" else address
    url = f"http://{public if ':' not in public else f'[{public}]'}:{port}"
    sys.stderr.write(f"tiermem: serving the UI at {url}" + ("" if lan else " (this machine only)"))
    sys.stderr.write("\n")
    if lan:
        sys.stderr.write("tiermem: anyone on your network can open it: stop with ctrl+c\n")
    server.Server(
        shlex.join([*command, "tui"]), host=address, port=port, title="tiermem", public_url=url
    ).serve()


def textual_serve_server() -> Any:
    """`textual_serve.server`, from the `serve` extra (only this command needs it)."""
    if importlib.util.find_spec("textual_serve") is None:
        raise MissingExtra('tiermem serve needs the serve extra: pip install "tiermem[serve]"')
    import textual_serve.server

    return textual_serve.server


def serve_address(host: str | None, lan: bool) -> str:
    """The address to bind: loopback unless `--lan` says otherwise, explicitly."""
    if host is None:
        return "0.0.0.0" if lan else LOOPBACK
    if not lan and not is_loopback(host):
        raise InvalidInput(f"{host} is reachable from other machines: add --lan to allow that")
    return host


def lan_address() -> str:
    """This machine's address on its network (what a phone types), or loopback if offline.
    Connecting a UDP socket sends nothing; it only picks the outgoing interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
            return str(probe.getsockname()[0])
        except OSError:
            return LOOPBACK
