"""CLI commands for the devices of a vault: `tiermem sync devices|add-device|approve-device|
remove-device|rename-device`.

Joining a new device (run in the new, empty home) either unlocks the vault with the recovery
key (`add-device --recovery`) or pairs with a device that already syncs (`add-device --pair`,
then `approve-device` on that device): both screens show six words, and the user types the
new device's words on the existing one. Removing a lost device rotates the vault key; it needs
the recovery key (and the passphrase, to keep it working), asked on the terminal or taken from
TIERMEM_RECOVERY_KEY / TIERMEM_PASSPHRASE or standard input. No secret is ever printed.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from typing import Any

import click

from tiermem.core.errors import InvalidInput
from tiermem.sync import crypto
from tiermem.sync.devices import epochs, rotation
from tiermem.sync.devices.membership import (
    DeviceInfo,
    JoinResult,
    add_device_with_recovery,
    list_devices,
    remove_device,
    rename_device,
    resolve_device,
)
from tiermem.sync.devices.pairing_approval import answer_pairing
from tiermem.sync.devices.pairing_exchange import PAIRING_TTL, NewDevicePairing, PairingRefused
from tiermem.sync.devices.secret_store import ENV_PASSPHRASE, ENV_RECOVERY_KEY, env_secret
from tiermem.sync.engine import SyncEngine
from tiermem.sync.state import MissingSecret, SyncFailed
from tiermem.sync.vault.hrana import HranaError
from tiermem.sync.vault.remote import allow_insecure_http
from tiermem.tui.cli.options import Options, emit, pass_options
from tiermem.tui.cli.prompts import (
    INSECURE_HTTP,
    ask_hidden,
    interactive,
    retry_policy,
    say,
    sync_token,
    sync_url,
)

WAIT = click.FloatRange(1.0, 24 * 3600.0)


def _when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _status(d: DeviceInfo) -> str:
    if d.revoked:
        return f"removed {_when(d.revoked_at)}"
    if d.key_differs and not d.current:
        return "THE SERVER LISTS ANOTHER KEY than the signed roster (the roster's is used)"
    by = ""
    if d.added_by:
        by = " (added by the recovery key)" if d.added_by == "recovery" else ""
        by = by or f" (added by {d.added_by[:12]}…)"
    if d.current:
        return "this device" + by
    return ("ok" if d.verified else "UNVERIFIED (not vouched for by the vault key)") + by


def _fingerprint(d: DeviceInfo) -> str:
    """A key's fingerprint, starred when only the server vouches for the key."""
    return d.fingerprint + ("*" if d.key_from == "server" else "")


def _devices_text(found: list[DeviceInfo], epoch: int) -> str:
    rows = [("ID", "NAME", "ADDED", "LAST SEEN", "KEY FINGERPRINT", "STATUS")]
    rows += [
        (
            d.device_id[:12],
            d.name or "-",
            _when(d.added),
            _when(d.last_seen),
            _fingerprint(d),
            _status(d),
        )
        for d in found
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5]
        for r in rows
    ]
    if any(d.key_from == "server" and not d.revoked for d in found):
        lines.append(
            "* key known only from the server's list (not on the signed roster): compare the "
            "fingerprint with that device's own `tiermem sync devices` before keeping it"
        )
    active = sum(not d.revoked for d in found)
    lines.append(f"{active} active device(s), {len(found) - active} removed; key epoch {epoch}")
    return "\n".join(lines)


@click.command(name="devices")
@pass_options
def devices_cmd(opts: Options) -> None:
    """List the devices of this agent's vault (and refresh this one's entry)."""
    with opts.open() as mem, SyncEngine(mem) as engine:
        engine.require_ready()
        found = list_devices(engine)
        epoch = engine.require_ready().epoch
    emit(
        opts,
        {"epoch": epoch, "devices": [asdict(d) for d in found]},
        lambda: _devices_text(found, epoch),
    )


@click.command(name="rename-device")
@click.argument("name")
@pass_options
def rename_cmd(opts: Options, name: str) -> None:
    """Name this device in the device list (sealed: the server never reads it)."""
    with opts.open() as mem, SyncEngine(mem) as engine:
        rename_device(engine, name)
        device = engine.require_ready().device_id.hex()
    emit(opts, {"device_id": device, "name": name}, f"this device is now named {name!r}")


# -- add-device (on the new device) ----------------------------------------------------------


def _recovery_key(from_stdin: bool) -> bytes:
    if from_stdin:
        line = sys.stdin.readline().strip()
        if not line:
            raise MissingSecret("standard input is empty: give the recovery key")
        return crypto.parse_recovery_key(line)
    from_env = env_secret(ENV_RECOVERY_KEY)
    if from_env is not None:
        return crypto.parse_recovery_key(from_env)
    if not interactive():
        raise MissingSecret(f"no terminal to ask on: set {ENV_RECOVERY_KEY}, or use --stdin")
    return crypto.parse_recovery_key(ask_hidden("Recovery key"))


def _join_text(r: JoinResult, pulled: str) -> str:
    return (
        f"this home is now device {r.device_id[:12]}… ({r.name!r}) of agent {r.agent_id!r}'s "
        f"vault at {r.url} (key epoch {r.epoch}, joined with the {r.via}); secrets in the "
        f"{r.secret_store} store{'' if r.token_stored else ' (token not stored)'}\n{pulled}"
    )


def _first_pull(opts: Options, result: JoinResult) -> tuple[dict[str, Any] | None, str]:
    """Bring the vault's memory here right away (a failure only postpones it)."""
    with opts.open() as mem, SyncEngine(mem) as engine:
        try:
            pulled = engine.pull(retry_policy(opts, 3))
        except HranaError as exc:
            return None, f"first pull failed ({exc}); run `tiermem sync pull` later"
    return asdict(
        pulled
    ), f"pulled {pulled.applied} record(s); run `tiermem daemon` to keep syncing"


@click.command(name="add-device")
@click.option("--url", help="Database URL (default $TIERMEM_SYNC_URL).")
@click.option(
    "--recovery", "mode", flag_value="recovery", help="Join by unlocking with the recovery key."
)
@click.option(
    "--pair",
    "mode",
    flag_value="pair",
    default=True,
    help="Join by pairing with a device that already syncs (default).",
)
@click.option("--name", help="This device's name in the device list (default: the host name).")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the recovery key from stdin.")
@click.option(
    "--wait",
    type=WAIT,
    default=PAIRING_TTL,
    show_default=True,
    help="Seconds to wait for the other device during pairing.",
)
@INSECURE_HTTP
@pass_options
def add_device_cmd(
    opts: Options,
    url: str | None,
    mode: str,
    name: str | None,
    from_stdin: bool,
    wait: float,
    insecure_http: bool,
) -> None:
    """Join this (empty) home to the agent's existing vault as a new device."""
    url = sync_url(url, insecure_http)
    token, token_from_env = sync_token(url)
    with opts.open(create=True) as mem:
        if insecure_http:
            allow_insecure_http(mem, True)
        if mode == "recovery":
            result = add_device_with_recovery(
                mem, url, token, _recovery_key(from_stdin), name, store_token=not token_from_env
            )
            code = None
        else:
            result, code = _pair_here(opts, mem, url, token, name, not token_from_env, wait)
    pulled, note = _first_pull(opts, result)
    emit(opts, asdict(result) | {"code": code, "pulled": pulled}, _join_text(result, note))


def _pair_here(
    opts: Options,
    mem: Any,
    url: str,
    token: str | None,
    name: str | None,
    store_token: bool,
    wait: float,
    approve_hint: str | None = None,
) -> tuple[JoinResult, str]:
    """The new device's side of pairing; `approve_hint`: where and what to run to approve."""
    pairing = NewDevicePairing(mem, url, token, name=name, store_token=store_token)
    hint = approve_hint or (
        f"On a device that already syncs agent {mem.agent_id!r}, run:\n\n"
        "    tiermem sync approve-device"
    )
    try:
        pairing.start()
        say(f"pairing request {pairing.request_id} posted. {hint}\n\nwaiting for it …")
        try:
            code = pairing.wait_code(wait)
            say(
                f"\nThe other device must show exactly these words:\n\n    {code}\n\n"
                "Type them there to approve. If it shows other words, refuse: someone is in "
                "the middle."
            )
            # Both sides confirm (numeric comparison): a server posing as the other device
            # could answer here, but it cannot make the real device show these words.
            if interactive() and not click.confirm(
                "Does the other device show the same words?", default=False, err=True
            ):
                raise PairingRefused("the words differ; pairing refused here, nothing was set up")
            say("waiting for the approval …")
            return pairing.finish(wait), code
        except BaseException:
            pairing.cancel()
            raise
    finally:
        pairing.close()


# -- approve-device (on an existing device) --------------------------------------------------


def _typed_code(given: str | None) -> str:
    if given is not None:
        return given
    if interactive():
        typed: str = click.prompt(
            "Type the words the new device shows (or 'no' to refuse)", err=True
        )
        return typed
    line = sys.stdin.readline()
    if not line.strip():
        raise MissingSecret(
            "no terminal to ask on: give the new device's words with --code or on stdin"
        )
    return line


@click.command(name="approve-device")
@click.option("--request", "request", help="The pairing request id (when several wait).")
@click.option(
    "--code",
    help="The words the new device shows (else asked on the terminal, or read from stdin).",
)
@click.option(
    "--wait",
    type=WAIT,
    default=PAIRING_TTL,
    show_default=True,
    help="Seconds to wait for the new device.",
)
@pass_options
def approve_device_cmd(opts: Options, request: str | None, code: str | None, wait: float) -> None:
    """Approve a new device's pairing request after comparing the words on both screens."""
    with opts.open() as mem, SyncEngine(mem) as engine:
        engine.require_ready()
        approval = answer_pairing(engine, request)
        try:
            ours = approval.wait_code(wait)
        except BaseException:
            approval.refuse()
            raise
        say(f"\nThis device shows:\n\n    {ours}\n")
        try:
            typed = _typed_code(code)
        except BaseException:
            approval.refuse()
            raise
        approval.approve(typed)  # refuses (and raises) when the words differ
        request_id = approval.pairing_id.hex()[:8]
    emit(
        opts,
        {"approved": True, "request": request_id, "code": ours},
        f"approved pairing request {request_id}: the new device finishes joining by itself",
    )


# -- remove-device ---------------------------------------------------------------------------


def _rotation_secrets(from_stdin: bool, has_passphrase: bool) -> tuple[bytes, str | None]:
    """(recovery key, passphrase or None to drop it)."""
    if from_stdin:
        key = _recovery_key(True)
        line = sys.stdin.readline().rstrip("\r\n") if has_passphrase else ""
        return key, line or None
    key = _recovery_key(False)
    if not has_passphrase:
        return key, None
    from_env = env_secret(ENV_PASSPHRASE)
    if from_env is not None:
        return key, from_env or None
    if interactive():
        typed = ask_hidden("Passphrase (empty: stop letting the passphrase unlock new data)")
        return key, typed or None
    return key, None


def _rotation_text(r: rotation.RotationResult) -> str:
    lines = [
        f"removed device {r.removed}; the vault key moved from epoch {r.old_epoch} to "
        f"{r.new_epoch}",
        f"kept: {len(r.kept)} device(s) ({', '.join(d[:12] for d in r.kept)})",
    ]
    if r.skipped:
        lines.append(
            "left out (not on the signed device roster, possibly added by the server): "
            + ", ".join(d[:12] for d in r.skipped)
            + "; pair them again if they are yours"
        )
    if r.also_removed:
        lines.append(
            "also removed (added by the removed device): "
            + ", ".join(d[:12] for d in r.also_removed)
        )
    if r.passphrase == "dropped":
        lines.append(
            "the passphrase was not given, so it no longer unlocks the vault (the recovery key "
            "does)"
        )
    lines += [r.note, r.token_note]
    return "\n".join(lines)


def _plan_text(plan: rotation.RotationPlan, names: dict[str, DeviceInfo], target: bytes) -> str:
    """Who keeps access after the removal: what the owner confirms."""

    def label(hex_id: str) -> str:
        info = names.get(hex_id)
        name = f" {info.name!r}" if info is not None and info.name else ""
        added = f", added {_when(info.added)}" if info is not None else ""
        return f"{hex_id[:12]}…{name}{added}"

    def by(k: rotation.KeptDevice) -> str:
        if not k.added_by:
            return "not on the signed roster yet: vouched for by the old key"
        return "by the recovery key" if k.added_by == "recovery" else f"by {k.added_by[:12]}…"

    lines = [f"Remove device {label(target.hex())} and rotate the vault key.", "Keeps access:"]
    lines += [f"  {label(k.device_id)} (added {by(k)}; key {k.fingerprint})" for k in plan.kept]
    if plan.also_removed:
        lines.append("Also removed (added by the device being removed; --keep ID to keep one):")
        lines += [f"  {label(d)}" for d in plan.also_removed]
    if plan.left_out:
        lines.append("Left out (not on the signed roster; --keep ID if one is yours):")
        lines += [f"  {label(d)}" for d in plan.left_out]
    return "\n".join(lines)


def _keeps(
    engine: SyncEngine, given: tuple[str, ...]
) -> tuple[tuple[bytes, ...], dict[bytes, str]]:
    """The devices named by --keep ID[:FINGERPRINT] and the fingerprints given with them."""
    ids: list[bytes] = []
    confirmed: dict[bytes, str] = {}
    for text in given:
        ref, _, shown = text.partition(":")
        device_id = resolve_device(engine, ref, active=True)
        ids.append(device_id)
        if shown.strip():
            confirmed[device_id] = shown.strip()
    return tuple(ids), confirmed


def _plan(
    engine: SyncEngine, target: bytes | None, kept: tuple[bytes, ...], confirmed: dict[bytes, str]
) -> rotation.RotationPlan:
    """The rotation plan; on a terminal, a kept device off the roster is confirmed by typing
    the fingerprint its own `sync devices` shows (without one: the one-line refusal)."""
    while True:
        try:
            return rotation.plan_rotation(engine, target, kept, confirmed)
        except rotation.UnconfirmedDevice as exc:
            if not interactive():
                raise
            say(
                f"Device {exc.device_id[:12]}… is not on the signed roster: the server alone "
                f"says its key has fingerprint {exc.fingerprint}. Run `tiermem sync devices` "
                "on that device and type the fingerprint it shows for itself."
            )
            typed = click.prompt("Fingerprint", err=True, default="", show_default=False)
            if not typed.strip():
                raise
            confirmed[bytes.fromhex(exc.device_id)] = typed


_KEEP_HELP = (
    "Keep this device although the removed one added it, or the roster does not list it (then "
    "as ID:FINGERPRINT, the fingerprint that device's own `sync devices` shows)."
)


@click.command(name="remove-device")
@click.argument("device_id")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--keep",
    "keep",
    multiple=True,
    metavar="ID[:FINGERPRINT]",
    help=_KEEP_HELP,
)
@click.option(
    "--stdin",
    "from_stdin",
    is_flag=True,
    help="Read the recovery key (and on a second line the passphrase) from stdin.",
)
@pass_options
def remove_device_cmd(
    opts: Options, device_id: str, yes: bool, keep: tuple[str, ...], from_stdin: bool
) -> None:
    """Revoke a lost device and rotate the vault key for future data."""
    with opts.open() as mem, SyncEngine(mem) as engine:
        engine.require_ready()
        epochs.refresh_epoch(engine)
        s = engine.require_ready()
        target = resolve_device(engine, device_id, active=True)
        if target == s.device_id:
            raise InvalidInput(
                "this is the device you are using; remove it from another device (or just "
                "delete this home)"
            )
        kept, confirmed = _keeps(engine, keep)
        plan = _plan(engine, target, kept, confirmed)
        if not yes:
            if not interactive():
                raise InvalidInput("add --yes to remove a device without a terminal to confirm on")
            names = {d.device_id: d for d in list_devices(engine, touch=False)}
            say(_plan_text(plan, names, target))
            click.confirm(
                "Go ahead? The devices above that keep access get the new key; the removed "
                "ones do not get data written from now on (what they downloaded stays readable "
                "to them).",
                abort=True,
                err=True,
            )
        recovery_key, passphrase = _rotation_secrets(from_stdin, s.passphrase_wrap is not None)
        try:
            result = remove_device(
                engine,
                target,
                recovery_key,
                passphrase=passphrase,
                keep=kept,
                confirmed=confirmed,
            )
        except HranaError as exc:
            raise SyncFailed(
                f"remove-device could not finish: {exc}; run it again (a rotation that did reach "
                "the server is picked up then)",
                exc.exit_code,
            ) from None
    emit(opts, asdict(result), lambda: _rotation_text(result))


def _rotate_text(r: rotation.RotationResult) -> str:
    lines = [
        f"the vault key moved from epoch {r.old_epoch} to {r.new_epoch}: data written from now "
        "on is sealed under a key no removed device ever had",
        f"kept: {len(r.kept)} device(s) ({', '.join(d[:12] for d in r.kept)})",
    ]
    if r.skipped:
        lines.append(
            "left out (not vouched for by the vault key): " + ", ".join(d[:12] for d in r.skipped)
        )
    if r.passphrase == "dropped":
        lines.append("the passphrase was not given, so it no longer unlocks the vault")
    return "\n".join(lines)


@click.command(name="rotate-key")
@click.option(
    "--keep",
    "keep",
    multiple=True,
    metavar="ID:FINGERPRINT",
    help=(
        "Also give the new key to this device the signed roster does not list yet (the "
        "fingerprint that device's own `sync devices` shows)."
    ),
)
@click.option(
    "--stdin",
    "from_stdin",
    is_flag=True,
    help="Read the recovery key (and on a second line the passphrase) from stdin.",
)
@pass_options
def rotate_key_cmd(opts: Options, keep: tuple[str, ...], from_stdin: bool) -> None:
    """Start a new key epoch without removing a device (e.g. on suspected compromise)."""
    with opts.open() as mem, SyncEngine(mem) as engine:
        engine.require_ready()
        epochs.refresh_epoch(engine)
        s = engine.require_ready()
        kept, confirmed = _keeps(engine, keep)
        if kept:
            _plan(engine, None, kept, confirmed)
        recovery_key, passphrase = _rotation_secrets(from_stdin, s.passphrase_wrap is not None)
        try:
            result = rotation.rotate(
                engine, recovery_key, passphrase=passphrase, keep=kept, confirmed=confirmed
            )
        except HranaError as exc:
            raise SyncFailed(
                f"rotate-key could not finish: {exc}; run it again (a rotation that did reach "
                "the server is picked up then)",
                exc.exit_code,
            ) from None
    emit(opts, asdict(result), lambda: _rotate_text(result))
