"""`tiermem spaces share|invite|join|members|remove-member|sync`: a space shared across people
and devices through a vault of its own, end to end encrypted (docs/spaces.md).

Joining reuses pairing: `spaces join` on the new member's home posts a request, `spaces invite`
on a writer's device answers it with the member's role; both screens show six words, typed on
the inviting side. The joined space's history then arrives by restore (`restore --space`: the
newest version of each record, checked and searchable as it streams), not a pull of every
version. Removing a member rotates the space key and needs the space's recovery key
(shown once by `spaces share`). Secrets are never printed, except that recovery key.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any

import click

from tiermem.core import spaces
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, RejectedRecords
from tiermem.sync import crypto
from tiermem.sync.devices.pairing_approval import answer_pairing
from tiermem.sync.devices.pairing_exchange import PAIRING_TTL
from tiermem.sync.engine import SyncEngine
from tiermem.sync.spaces import vaults
from tiermem.sync.state import SyncFailed
from tiermem.sync.vault.hrana import HranaError
from tiermem.sync.vault.remote import allow_insecure_http
from tiermem.tui.cli.commands.devices import (
    WAIT,
    _pair_here,
    _rotation_secrets,
    _typed_code,
)
from tiermem.tui.cli.commands.restore import progress_bar, restored_space
from tiermem.tui.cli.commands.sync import _recovery_key
from tiermem.tui.cli.options import Options, emit, pass_options
from tiermem.tui.cli.prompts import (
    INSECURE_HTTP,
    interactive,
    retry_policy,
    say,
    sync_token,
    sync_url,
)

ROLE = click.option(
    "--role",
    type=click.Choice(spaces.ROLES),
    required=True,
    help="writer: stores into the space; reader: only reads it (its records are refused).",
)


@click.command(name="share")
@click.argument("name")
@click.option("--url", help="Database URL (default $TIERMEM_SYNC_URL); the same or another one.")
@INSECURE_HTTP
@pass_options
def share_cmd(opts: Options, name: str, url: str | None, insecure_http: bool) -> None:
    """Share a space through a vault of its own; show its recovery key once."""
    url = sync_url(url, insecure_http)
    token, token_from_env = sync_token(url)
    with opts.open(create=True) as mem:
        spaces.require_writer(mem.db, mem.agent_id, name)
        if insecure_http:
            allow_insecure_http(mem, True)
        key, reveal = _recovery_key(opts)
        try:
            result, pushed = vaults.share(
                mem, name, url, token, key, store_token=not token_from_env,
                policy=retry_policy(opts, 3),
            )  # fmt: skip
        except HranaError as exc:
            raise SyncFailed(f"spaces share could not finish: {exc}", exc.exit_code) from None
    payload: dict[str, Any] = {"space": name, **asdict(result), "pushed": asdict(pushed)}
    if reveal is not None:
        payload["recovery_key"] = crypto.format_recovery_key(reveal)
    emit(
        opts,
        payload,
        f"space {name!r} is shared through its own vault at {result.url} (this device "
        f"{result.device_id[:12]}…, a writer); invite members with `tiermem spaces invite "
        f"{name} --role writer|reader` while they run `tiermem spaces join {name}`",
    )


@click.command(name="invite")
@click.argument("name")
@ROLE
@click.option(
    "--as",
    "member",
    metavar="MEMBER",
    required=True,
    help="The member's name every member's device shows for its writes (signed by this one).",
)
@click.option("--request", "request", help="The join request id (when several wait).")
@click.option("--code", help="The words the new member's screen shows (else asked, or stdin).")
@click.option("--wait", type=WAIT, default=PAIRING_TTL, show_default=True)
@pass_options
def invite_cmd(
    opts: Options,
    name: str,
    role: str,
    member: str,
    request: str | None,
    code: str | None,
    wait: float,
) -> None:
    """Let a member's device in (it runs `spaces join`) as a writer or a reader, by name."""
    member = vaults.check_member_name(member)
    with opts.open() as mem, vaults.open_engine(mem, name) as engine:
        spaces.require_writer(mem.db, mem.agent_id, name)
        engine.require_ready()
        approval = answer_pairing(engine, request, role=spaces.check_role(role), name=member)
        try:
            ours = approval.wait_code(wait)
            say(f"\nThis device shows:\n\n    {ours}\n")
            typed = _typed_code(code)
        except BaseException:
            approval.refuse()
            raise
        approval.approve(typed)  # refuses (and raises) when the words differ
        device = approval.pairing_id.hex()
    emit(
        opts,
        {"space": name, "role": role, "member": member, "device_id": device, "code": ours},
        f"invited {member!r} (device {device[:12]}…) to space {name!r} as a {role}",
    )


@click.command(name="join")
@click.argument("name")
@click.option("--url", help="Database URL of the space's vault (default $TIERMEM_SYNC_URL).")
@click.option("--name", "device_name", help="This device's name in the member list.")
@click.option("--wait", type=WAIT, default=PAIRING_TTL, show_default=True)
@INSECURE_HTTP
@pass_options
def join_cmd(
    opts: Options,
    name: str,
    url: str | None,
    device_name: str | None,
    wait: float,
    insecure_http: bool,
) -> None:
    """Join a space another person shares (a member runs `spaces invite` meanwhile), then
    restore its history here."""
    spaces.check_name(name)
    url = sync_url(url, insecure_http)
    token, token_from_env = sync_token(url)
    hint = (
        f"A writer of space {name!r} runs:\n\n    tiermem spaces invite {name} --role writer|reader"
    )
    with opts.open(create=True) as mem, mem.open_space(name) as space:
        if insecure_http:
            allow_insecure_http(space, True)
        joined, code = _pair_here(
            opts, space, url, token, device_name, not token_from_env, wait, hint
        )
        with SyncEngine(space) as engine:
            role = vaults.adopt(mem, engine)
        fetched = _restore_joined(mem, opts, name)
    emit(
        opts,
        asdict(joined) | {"space": name, "role": role, "code": code, "restored": fetched},
        f"joined space {name!r} as a {role} (device {joined.device_id[:12]}…); "
        f"{opts.agent_id!r} includes it. {fetched['note']}",
    )


def _restore_joined(mem: Memory, opts: Options, name: str) -> dict[str, Any]:
    """The joined space's history, restored (a network failure only postpones it; records not
    signed by a writer stop the command, exit 48)."""
    show = not opts.json and sys.stderr.isatty()
    try:
        with progress_bar(show, "the space") as progress:
            result = restored_space(mem, name, progress=progress, policy=retry_policy(opts, 3))
    except SyncFailed as exc:
        return {"result": None, "note": str(exc)}
    except RejectedRecords as exc:
        raise RejectedRecords(f"this device joined space {name!r}, but {exc}") from None
    return {
        "result": asdict(result),
        "note": f"restored {result.memories} memories of the space in {result.seconds:.2f} s",
    }


def _sync_dict(d: vaults.SpaceSync) -> dict[str, Any]:
    return {
        "space": d.space,
        "role": d.role,
        "pulled": None if d.pulled is None else asdict(d.pulled),
        "pushed": None if d.pushed is None else asdict(d.pushed),
        "writers": d.writers,
    }


def sync_line(d: vaults.SpaceSync) -> str:
    """One line per space for `spaces sync` and `sync push|pull|now`."""
    parts = [f"space {d.space} ({d.role}):"]
    if d.pulled is not None:
        parts.append(f"pulled {d.pulled.memories} memory record(s)")
        if d.pulled.rejected:
            parts.append(f"REFUSED {d.pulled.rejected} record(s) (not signed by a writer)")
    if d.pushed is not None:
        parts.append(
            f"pushed {d.pushed.memories} memory record(s)" if d.pushed.pushed else "nothing to push"
        )
    return " ".join(parts)


@click.command(name="sync")
@click.argument("name", required=False)
@pass_options
def sync_cmd(opts: Options, name: str | None) -> None:
    """Pull, then push (a writer), the shared spaces this agent includes (or only NAME)."""
    with opts.open() as mem:
        if name is not None:
            spaces.require(mem.db, name)
        try:
            done = vaults.sync_included(mem, retry_policy(opts, 5), only=name)
        except HranaError as exc:
            raise SyncFailed(f"spaces sync failed: {exc}", exc.exit_code) from None
    if name is not None and not done:
        raise InvalidInput(f"space {name!r} is not shared (tiermem spaces share {name})")
    emit(
        opts,
        {"spaces": [_sync_dict(d) for d in done]},
        "\n".join(sync_line(d) for d in done) or "no shared space to sync",
    )
    vaults.raise_refused(done)


def _member_dict(m: vaults.Member) -> dict[str, Any]:
    return asdict(m.device) | {"role": m.role, "member": m.member}


def _member_line(m: vaults.Member) -> str:
    d = m.device
    state = "removed" if d.revoked else ("this device" if d.current else "active")
    device = f"device {d.name}" if d.name else "device"
    return (
        f"  {d.device_id[:12]}  {m.member or '(unnamed)':<16} {m.role or '?':<7} {state:<12}"
        f"{device}"
    )


@click.command(name="members")
@click.argument("name")
@pass_options
def members_cmd(opts: Options, name: str) -> None:
    """List the member devices of a shared space: signed names and roles."""
    with opts.open() as mem, vaults.open_engine(mem, name) as engine:
        engine.require_ready()
        found = vaults.members(engine)
        epoch = engine.require_ready().epoch
    emit(
        opts,
        {"space": name, "epoch": epoch, "members": [_member_dict(m) for m in found]},
        lambda: "\n".join([f"space {name}, key epoch {epoch}:", *map(_member_line, found)]),
    )


@click.command(name="remove-member")
@click.argument("name")
@click.argument("member")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--stdin",
    "from_stdin",
    is_flag=True,
    help="Read the space's recovery key (and on a second line its passphrase) from stdin.",
)
@pass_options
def remove_member_cmd(opts: Options, name: str, member: str, yes: bool, from_stdin: bool) -> None:
    """Remove a member's device (its name or id) and rotate the space key."""
    with opts.open() as mem, vaults.open_engine(mem, name) as engine:
        s = engine.require_ready()
        if not yes:
            if not interactive():
                raise InvalidInput("add --yes to remove a member without a terminal to confirm on")
            click.confirm(
                f"Remove {member!r} from space {name!r} and rotate its key?", abort=True, err=True
            )
        key, passphrase = _rotation_secrets(from_stdin, s.passphrase_wrap is not None)
        try:
            result = vaults.remove_member(engine, member, key, passphrase=passphrase)
        except HranaError as exc:
            raise SyncFailed(
                f"remove-member could not finish: {exc}; run it again", exc.exit_code
            ) from None
    emit(
        opts,
        {"space": name} | asdict(result),
        f"removed {(result.removed or member)[:12]}… from space {name!r}; the space key moved from epoch "
        f"{result.old_epoch} to {result.new_epoch}: nothing stored from now on can be read with "
        "what the removed device holds (what it already had, it keeps)",
    )
