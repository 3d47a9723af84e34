"""CLI commands for getting a vault back and trusting it: `restore`, `sync check`, `sync prune`.

`restore` brings the critical state first (the agent is usable as soon as it says so), then
streams every memory with a progress bar on a terminal (nothing but the result with --json),
and finishes an interrupted restore when run again; `restore --space NAME` does the same for a
shared space this home joined, with this device's keys and every writer's signature checked,
and `restore --space NAME --url URL` for a space no device of which is left, with its recovery
key (or passphrase).
`sync check` exits with a distinct code per damage class (see `tiermem.sync.restore.check`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tiermem.core import spaces
from tiermem.core.config import SyncConfig, load_config
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.paths import Home, default_home
from tiermem.sync import crypto
from tiermem.sync.devices.secret_store import (
    ENV_PASSPHRASE,
    ENV_RECOVERY_KEY,
    ENV_TOKEN,
    env_secret,
)
from tiermem.sync.restore import (
    PruneResult,
    RestoreProgress,
    RestoreResult,
    parse_at,
    prune,
    restore,
)
from tiermem.sync.state import MissingSecret, SyncFailed
from tiermem.sync.vault.hrana import AuthFailed, HranaError
from tiermem.tui.cli.commands.conflicts import open_scoped
from tiermem.tui.cli.lazy import lazy_import
from tiermem.tui.cli.options import Options, emit, pass_options
from tiermem.tui.cli.prompts import INSECURE_HTTP, ask_hidden, interactive, sync_token, sync_url

if TYPE_CHECKING:
    import rich.console as rich_console
    import rich.progress as rich_progress

    from tiermem.sync import engine as enginemod
    from tiermem.sync.restore import check as checkmod
    from tiermem.sync.restore.check import CheckReport
    from tiermem.sync.spaces import restore as space_restore
else:  # a progress bar (on a terminal only), `sync check` and `sync prune` load them: a restore
    # needs none of them and starts faster without
    rich_console = lazy_import("rich.console")
    rich_progress = lazy_import("rich.progress")
    checkmod = lazy_import("tiermem.sync.restore.check")
    enginemod = lazy_import("tiermem.sync.engine")
    space_restore = lazy_import("tiermem.sync.spaces.restore")

# -- restore ---------------------------------------------------------------------------------


def _unlock_secret(use_passphrase: bool, from_stdin: bool) -> tuple[bytes | None, str | None]:
    """(recovery key, passphrase): exactly one is set."""
    if from_stdin:
        line = sys.stdin.readline().rstrip("\r\n")
        if not line:
            raise MissingSecret("standard input is empty: give the recovery key or passphrase")
        return (None, line) if use_passphrase else (crypto.parse_recovery_key(line), None)
    if not use_passphrase:
        env_key = env_secret(ENV_RECOVERY_KEY)
        if env_key is not None:
            return crypto.parse_recovery_key(env_key), None
    env_pw = env_secret(ENV_PASSPHRASE)
    if env_pw is not None and (use_passphrase or not interactive()):
        return None, env_pw
    if not interactive():
        raise MissingSecret(
            f"no terminal to ask on: set {ENV_RECOVERY_KEY} (or {ENV_PASSPHRASE}), or use --stdin"
        )
    if use_passphrase:
        return None, ask_hidden("Passphrase")
    return crypto.parse_recovery_key(ask_hidden("Recovery key")), None


def _restore_text(r: RestoreResult) -> str:
    again = " (restored here before: brought up to date)" if r.refreshed else ""
    resumed = " (finished an interrupted restore)" if r.resumed else ""
    when = f" as of {r.at}" if r.at else ""
    space = spaces.space_of(r.agent_id)
    what = f"agent {r.agent_id!r}" if space is None else f"space {space!r}"
    lines = [
        f"restored {what} from {r.url}{when} into {r.home} in {r.seconds:.2f} s{again}{resumed}",
    ]
    if not r.resumed:
        lines.append(
            f"critical state {r.version} (unlocked with the {r.unlocked_with}): {r.lessons} "
            f"lesson(s), {r.tree_nodes} tree node(s), hot {r.hot_bytes} bytes; usable after "
            f"{r.usable_seconds:.2f} s"
        )
    lines.append(
        f"memories: {r.memories} restored ({r.tombstones} deleted, {r.kept_local} kept from "
        f"local writes) from {r.rows} remote row(s) in {r.pages} page(s), "
        f"{r.memory_bytes / 1e6:.1f} MB"
    )
    lines.append(f"MEMORY.md: {r.memory_md}")
    if r.salvage:
        lines.append(
            f"salvage: {len(r.problems)} problem(s) found"
            + (" (nothing missing or damaged)" if not r.problems else "; not restored as listed:")
        )
        lines += [
            f"  {p['kind']}: {p['message']}"
            + (f" [record {p['record_id'][:16]}… {p['version']}]" if p["record_id"] else "")
            for p in r.problems
        ]
    if space is not None:
        lines.append(
            f"this device: {r.device_id[:12]}…, a member of the space: every memory's writer is "
            f"the roster's; `tiermem spaces sync {space}` (or the daemon) keeps it current"
        )
        return "\n".join(lines)
    lines.append(
        f"this device: {r.device_id[:12]}… (registered with its first push; "
        "run `tiermem daemon` to keep pushing)"
    )
    return "\n".join(lines)


@contextmanager
def progress_bar(
    show: bool, what: str = "the agent"
) -> Iterator[Callable[[RestoreProgress], None]]:
    """A rich progress bar on standard error (a terminal only); else a silent callback."""
    if not show:
        yield lambda p: None
        return
    console = rich_console.Console(stderr=True)
    columns = (
        rich_progress.TextColumn("[progress.description]{task.description}"),
        rich_progress.BarColumn(),
        rich_progress.DownloadColumn(),
        rich_progress.TransferSpeedColumn(),
        rich_progress.TimeRemainingColumn(),
    )
    with rich_progress.Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("memories", total=None)
        announced = False

        def update(p: RestoreProgress) -> None:
            nonlocal announced
            if p.usable and not announced:
                announced = True
                console.print(f"critical state restored: {what} is usable now; streaming memories…")
            bar.update(
                task,
                completed=p.bytes,
                total=max(p.total_bytes, 1),
                description=f"{p.phase} ({p.memories} memories, {p.searchable} searchable)",
            )

        yield update


def _sync_config(home: Path) -> SyncConfig:
    path = Home(home).config_path
    return load_config(path).sync if path.is_file() else SyncConfig()


@click.command(name="restore")
@click.option(
    "--space",
    metavar="NAME",
    help="Restore a shared space: one this home joined, with this device's keys; with --url, "
    "into any home with the space's recovery key (or passphrase).",
)
@click.option("--url", help="Database URL (default $TIERMEM_SYNC_URL).")
@click.option("--agent-id", "agent", help="Agent to restore (default: the global --agent-id).")
@click.option(
    "--passphrase", "use_passphrase", is_flag=True, help="Unlock with the passphrase instead."
)
@click.option(
    "--stdin",
    "from_stdin",
    is_flag=True,
    help="Read the recovery key (or, with --passphrase, the passphrase) from standard input.",
)
@click.option(
    "--at",
    "at",
    metavar="TIME|VERSION",
    help="Restore as of a point in time: a version, Unix seconds or an ISO date/time.",
)
@click.option(
    "--page-rows",
    type=click.IntRange(1, 100_000),
    default=None,
    help="Remote rows per request (default: [sync] restore_page_rows, 1000).",
)
@click.option(
    "--salvage",
    is_flag=True,
    help="Restore everything that authenticates even when the server's copy is incomplete "
    "or damaged, and list what is missing or left out.",
)
@INSECURE_HTTP
@pass_options
def restore_cmd(
    opts: Options,
    space: str | None,
    url: str | None,
    agent: str | None,
    use_passphrase: bool,
    from_stdin: bool,
    at: str | None,
    page_rows: int | None,
    salvage: bool,
    insecure_http: bool,
) -> None:
    """Restore an agent from Turso into an empty home: critical state first, then every memory.

    The server's copy is checked against the vault's manifests first: a rolled-back, deleted
    or replayed record stops it (exit 45, 46, 47) before anything is written. Run it again
    after an interruption: it continues where it stopped. With --space, a record not signed by
    a writer of the space stops it (exit 48); with --space and --url, the recovery key signs
    this device onto the space's roster as a writer named after the agent."""
    bound = None if at is None else parse_at(at)
    if space is not None and agent is not None:
        raise InvalidInput("restore --space restores the space for the global --agent-id")
    if space is not None and url is None:
        given = {"--passphrase": use_passphrase, "--stdin": from_stdin}
        extra = [
            name for name, value in (given | {"--insecure-http": insecure_http}).items() if value
        ]
        if extra:
            raise InvalidInput(
                f"restore --space without --url uses this device's own keys and the space's "
                f"server: {', '.join(extra)} do(es) not apply"
            )
        _restore_space(opts, space, bound, page_rows, salvage)
        return
    url = sync_url(url, insecure_http)
    home = Path(opts.home if opts.home is not None else default_home())
    token, token_from_env = sync_token(url)
    recovery_key, passphrase = _unlock_secret(use_passphrase, from_stdin)
    show = not opts.json and sys.stderr.isatty()
    if space is not None:
        secret = space_restore.Secret(opts.agent_id, recovery_key, passphrase)
        chosen: dict[str, Any] = {"store_token": not token_from_env, "at": bound}
        chosen |= {
            "salvage": salvage,
            "page_rows": page_rows or _sync_config(home).restore_page_rows,
        }
        _recover_space(opts, home, space, (url, token), secret, show, insecure_http, chosen)
        return
    with progress_bar(show) as progress:
        try:
            result = restore(
                home,
                agent or opts.agent_id,
                url,
                token,
                recovery_key=recovery_key,
                passphrase=passphrase,
                store_token=not token_from_env,
                at=bound,
                progress=progress,
                page_rows=page_rows or _sync_config(home).restore_page_rows,
                salvage=salvage,
                insecure_http=insecure_http,
            )
        except AuthFailed as exc:
            raise SyncFailed(
                f"restore stopped: {exc}; give a valid token (${ENV_TOKEN} or the prompt) and "
                "run the command again: it continues where it stopped",
                exc.exit_code,
            ) from None
        except HranaError as exc:
            raise SyncFailed(
                f"restore stopped: {exc}; run the same command again to continue",
                exc.exit_code,
            ) from None
    emit(opts, asdict(result), lambda: _restore_text(result))


def _restore_space(
    opts: Options, name: str, at: str | None, page_rows: int | None, salvage: bool
) -> None:
    """`restore --space NAME`: the space's vault into its scope here (`spaces.restore`)."""
    with opts.open() as mem:
        if spaces.membership(mem.db, mem.agent_id, spaces.require(mem.db, name)) is None:
            raise NotFound(f"agent {mem.agent_id!r} does not include space {name!r}")
        show = not opts.json and sys.stderr.isatty()
        with progress_bar(show, "the space") as progress:
            result = restored_space(
                mem,
                name,
                at=at,
                progress=progress,
                page_rows=page_rows or mem.cfg.sync.restore_page_rows,
                salvage=salvage,
            )
    emit(opts, asdict(result) | {"space": name}, lambda: _restore_text(result))


def _recover_space(
    opts: Options,
    home: Path,
    name: str,
    server: tuple[str, str | None],
    secret: space_restore.Secret,
    show: bool,
    insecure_http: bool,
    given: dict[str, Any],
) -> None:
    """`restore --space NAME --url URL`: the space's vault into this home with its recovery
    key (or passphrase), this device signed on as a writer named after the agent, which then
    includes the space (`spaces.restore.recover_space`)."""
    url, token = server
    with progress_bar(show, "the space") as progress:
        result = _space_errors(
            name,
            lambda: space_restore.recover_space(
                home, name, url, token, secret, progress=progress, insecure_http=insecure_http,
                **given,
            ),
        )  # fmt: skip
    with opts.open(create=True) as mem:
        role = space_restore.include_recovered(mem, name)
    emit(
        opts,
        asdict(result) | {"space": name, "role": role, "member": secret.member},
        lambda: _restore_text(result) + f"\n{opts.agent_id!r} includes space {name!r} as a {role}",
    )


def restored_space(mem: Memory, name: str, **given: Any) -> RestoreResult:
    """`spaces.restore.restore_space`, with a network failure said as a restore's is."""
    return _space_errors(name, lambda: space_restore.restore_space(mem, name, **given))


def _space_errors(name: str, run: Callable[[], RestoreResult]) -> RestoreResult:
    """A space's restore, with a network failure said as a restore's is."""
    try:
        return run()
    except AuthFailed as exc:
        raise SyncFailed(
            f"restore of space {name!r} stopped: {exc}; give a valid token (${ENV_TOKEN}) and "
            f"run `tiermem restore --space {name}`: it continues where it stopped",
            exc.exit_code,
        ) from None
    except HranaError as exc:
        raise SyncFailed(
            f"restore of space {name!r} stopped: {exc}; run `tiermem restore --space {name}` "
            "to continue",
            exc.exit_code,
        ) from None


# -- sync check ------------------------------------------------------------------------------


def _check_text(r: CheckReport) -> str:
    mode = (
        "structure, integrity and contents"
        if r.read_data
        else "structure and integrity (add --read-data to decrypt the contents too)"
    )
    lines = [
        f"checked agent {r.agent_id!r} at {r.url}: {mode}",
        f"{r.rows} row(s), {r.records} record(s), {r.manifests} manifest(s) from "
        f"{r.devices} device(s), {r.lines} manifest line(s) ({r.pruned} pruned), "
        f"{r.decrypted} decrypted, {r.bytes / 1e6:.1f} MB in {r.seconds:.2f} s",
    ]
    if r.horizon:
        lines.append(f"prune horizon: {r.horizon}")
    lines += [f"note: {note}" for note in r.notes]
    if r.ok:
        lines.append("no damage found")
        return "\n".join(lines)
    counts = ", ".join(f"{n} {kind}" for kind, n in r.counts.items() if n)
    lines.append(f"DAMAGE: {counts}")
    for p in r.problems[:20]:
        where = f" [seq {p.seq}]" if p.seq is not None else ""
        lines.append(f"  {p.kind}: {p.message}{where}")
    if len(r.problems) > 20:
        lines.append(f"  … and {len(r.problems) - 20} more (see --json)")
    return "\n".join(lines)


@click.command(name="check")
@click.option(
    "--read-data",
    is_flag=True,
    help="Also download, authenticate and decrypt every record (slower).",
)
@click.option(
    "--space",
    metavar="NAME",
    help="Check the vault of a shared space this agent includes (its writers' signatures too).",
)
@pass_options
def sync_check(opts: Options, read_data: bool, space: str | None) -> None:
    """Verify the server's copy: manifests, versions, key wraps (and with --read-data, every
    record). Exit codes: 0 clean, 40 tampered, 41 missing, 42 gap/rollback, 43 key wraps."""
    with open_scoped(opts, space) as mem, enginemod.SyncEngine(mem) as engine:
        show = not opts.json and sys.stderr.isatty()
        with _check_bar(show) as progress:
            try:
                report = checkmod.check(
                    engine,
                    read_data=read_data,
                    page_rows=mem.cfg.sync.restore_page_rows,
                    progress=progress,
                )
            except HranaError as exc:
                raise SyncFailed(f"sync check could not finish: {exc}", exc.exit_code) from None
    payload: dict[str, Any] = asdict(report) | {"exit_code": report.exit_code}
    emit(opts, payload, lambda: _check_text(report))
    if not report.ok:
        counts = ", ".join(f"{n} {kind}" for kind, n in report.counts.items() if n)
        raise checkmod.DamageFound(f"sync check found damage: {counts}", report.exit_code)


@contextmanager
def _check_bar(show: bool) -> Iterator[Callable[[int, int], None] | None]:
    if not show:
        yield None
        return
    with rich_progress.Progress(console=rich_console.Console(stderr=True), transient=True) as bar:
        task = bar.add_task("reading rows", total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


# -- sync prune ------------------------------------------------------------------------------


def _prune_text(r: PruneResult) -> str:
    horizon = (
        f"points in time from {r.horizon} on restore completely"
        if r.horizon
        else "nothing was ever pruned: every point in time restores"
    )
    if r.raced:
        return "another device pruned the vault meanwhile; nothing was done"
    younger = f" and every version younger than {r.keep_days:g} day(s)" if r.keep_days else ""
    compacted = (
        f"\n{r.compacted} manifest(s) compacted into checkpoint {r.checkpoint} "
        f"({r.checkpoint_lines} line(s))"
        if r.checkpoint
        else ""
    )
    previous = {
        "copy": "\nthe previous checkpoint was this device's copy: nothing of it downloaded",
        "downloaded": f"\nthe previous checkpoint was downloaded: {r.downloaded_because}",
    }.get(r.previous, "")
    damaged = "".join(f"\ndamage (not compacted): {d}" for d in r.damaged)
    return (
        f"pruned {r.deleted} old version(s), kept {r.kept} (newest {r.keep}{younger} of each of "
        f"{r.records} record(s)) in {r.seconds:.2f} s{compacted}{previous}\n{horizon}{damaged}"
    )


@click.command(name="prune")
@click.option(
    "--keep",
    type=click.IntRange(1, None),
    default=None,
    help="Newest versions to keep per record, whatever their age (default: [sync] "
    "keep_versions, 1).",
)
@click.option(
    "--days",
    type=click.FloatRange(0, 36500),
    default=None,
    help="Also keep every version younger than this many days (default: [sync] keep_days, 30).",
)
@pass_options
def sync_prune(opts: Options, keep: int | None, days: float | None) -> None:
    """Delete old remote versions (beyond the newest N of a record and older than D days;
    never the newest) and compact the manifests into a checkpoint."""
    with opts.open() as mem, enginemod.SyncEngine(mem) as engine:
        cfg = mem.cfg.sync
        try:
            result = prune(
                engine,
                keep or cfg.keep_versions,
                keep_days=cfg.keep_days if days is None else days,
            )
        except HranaError as exc:
            raise SyncFailed(f"sync prune could not finish: {exc}", exc.exit_code) from None
    emit(opts, asdict(result), lambda: _prune_text(result))
    if result.damaged:
        raise checkmod.DamageFound(
            f"sync prune found damage: {len(result.damaged)} row(s) written under an ended key "
            "epoch after its rotation; run `tiermem sync check`",
            checkmod.DAMAGE_EXIT_CODES["tampered"],
        )
