"""Finding a vault on the server before this device knows its agent tag (`state.Settings.tag`):
with the recovery key, its keyed tag (`crypto.keyed_agent_tag`) or else the old unkeyed one; with
the passphrase only, each candidate vault's passphrase wrap in turn.

A passphrase cannot compute the tag, so a passphrase-only restore lists the vaults that have a
passphrase wrap (the agent's unkeyed tag first, then newest first, at most `MAX_CANDIDATES`) and
tries each one's newest wrap. The wrap's authenticated context holds the agent id and a wrap id
derived from the tag, so a wrap opens only under the very tag it was made for: a server that
files a wrap under another tag, or offers another vault's, cannot make this device adopt it.

A wrap names its own Argon2id cost, and the server chooses the candidates, so the work is
bounded twice: at most `MAX_CANDIDATES` wraps, and at most `WORK_BUDGET` (that many runs at the
cost tiermem writes) in all; a wrap that would overrun what is left is passed over, unopened."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from tiermem.core.errors import NothingToRestore, WrongPassphrase
from tiermem.sync import crypto, records
from tiermem.sync.state import agent_tag, wrap_id
from tiermem.sync.vault.hrana import Args, ResultSet, SqlError

__all__ = [
    "MAX_CANDIDATES",
    "Opened",
    "open_with_passphrase",
    "open_with_recovery_key",
    "require_some_vault",
    "secret_wraps",
    "wraps_at",
]

MAX_CANDIDATES: Final = 16
"""How many vaults a passphrase-only restore tries (each costs one Argon2id run)."""


def kdf_cost(params: crypto.KdfParameters) -> int:
    """An Argon2id run's work: memory (KiB) times passes."""
    return params.memory_kib * params.iterations


WORK_BUDGET: Final = MAX_CANDIDATES * kdf_cost(crypto.DEFAULT_KDF_PARAMS)
"""The Argon2id work a passphrase-only restore spends at most, over every candidate."""

Select = Callable[[str, Args], ResultSet]
Rows = Sequence[Sequence[object]]

_SECRET_WRAPS: Final = (
    "SELECT epoch, kind, blob FROM key_wraps WHERE agent_tag = ? "
    "AND kind IN ('recovery', 'passphrase') ORDER BY epoch DESC"
)
_CANDIDATES: Final = (
    "SELECT agent_tag FROM key_wraps WHERE kind = 'passphrase' GROUP BY agent_tag "
    "ORDER BY max(rowid) DESC LIMIT ?"
)


@dataclass(frozen=True)
class Opened:
    """A vault as a secret opened it: its tag, newest epoch, that epoch's recovery and
    passphrase wraps, and its key."""

    tag: bytes
    epoch: int
    wraps: dict[str, bytes]
    key: bytes


def secret_wraps(select: Select, url: str, tag: bytes) -> Rows:
    """The recovery and passphrase wraps filed under `tag`, newest epoch first."""
    try:
        return select(_SECRET_WRAPS, (tag,)).rows
    except SqlError as exc:
        if "no such table" not in str(exc):
            raise
        raise NothingToRestore(f"{url} holds no tiermem vault (run `sync init` first)") from None


def wraps_at(rows: Rows, epoch: int | None = None) -> tuple[int, dict[str, bytes]]:
    """The newest (or the given) epoch of `secret_wraps` rows and its wraps by kind."""
    epoch = records.server_int(rows[0][0]) if epoch is None else epoch
    by_kind = {
        str(kind): records.server_blob(blob)
        for e, kind, blob in rows
        if records.server_int(e) == epoch
    }
    return epoch, by_kind


def require_some_vault(select: Select) -> None:
    """`NothingToRestore` at a server that holds no vault at all."""
    try:
        rows = select("SELECT 1 FROM key_wraps WHERE kind = 'recovery' LIMIT 1", ()).rows
    except SqlError as exc:
        if "no such table" not in str(exc):
            raise
        rows = ()
    if not rows:
        raise NothingToRestore(
            "the server holds no vault (set it up with `tiermem sync init` on the first device)"
        )


def open_with_recovery_key(select: Select, url: str, agent_id: str, recovery_key: bytes) -> Opened:
    """The vault `recovery_key` opens: under its keyed tag, else (a vault set up before keyed
    tags) under the unkeyed one."""
    for tag in (crypto.keyed_agent_tag(recovery_key, agent_id), agent_tag(agent_id)):
        rows = secret_wraps(select, url, tag)
        if rows:
            break
    else:
        raise NothingToRestore(
            f"{url} holds no vault for agent {agent_id!r} under this recovery key (set it up "
            "with `tiermem sync init` on the first device)"
        )
    newest, by_kind = wraps_at(rows)
    if "recovery" not in by_kind:
        raise NothingToRestore(f"the vault of agent {agent_id!r} has no recovery key wrap")
    context = crypto.WrapContext(agent_id, newest, wrap_id(tag, newest, "recovery"))
    key = crypto.unwrap_with_recovery_key(by_kind["recovery"], recovery_key, context)
    return Opened(tag, newest, by_kind, key)


def open_with_passphrase(select: Select, url: str, agent_id: str, passphrase: str) -> Opened:
    """The vault `passphrase` opens, among the candidates (see the module docstring)."""
    old = agent_tag(agent_id)
    own = secret_wraps(select, url, old)  # first: "no tiermem vault" when there are no tables
    listed = [records.server_blob(r[0]) for r in select(_CANDIDATES, (MAX_CANDIDATES + 1,)).rows]
    candidates = [old, *(t for t in listed if t != old)]
    capped = len(candidates) > MAX_CANDIDATES
    tried, budget = 0, WORK_BUDGET
    for tag in candidates[:MAX_CANDIDATES]:
        rows = own if tag == old else secret_wraps(select, url, tag)
        if not rows:
            continue
        epoch, by_kind = wraps_at(rows)
        blob = by_kind.get("passphrase")
        if blob is None or "recovery" not in by_kind:  # a vault a restore cannot finish
            continue
        cost = _cost(blob)
        if cost > budget:
            capped = True
            continue
        tried, budget = tried + 1, budget - cost
        context = crypto.WrapContext(agent_id, epoch, wrap_id(tag, epoch, "passphrase"))
        try:
            key = crypto.unwrap_with_passphrase(blob, passphrase, context)
        except crypto.CryptoError:
            continue  # another vault's, or not this passphrase
        return Opened(tag, epoch, by_kind, key)
    if not tried:
        raise NothingToRestore(
            f"{url} holds no vault with a passphrase for agent {agent_id!r}; use the recovery key"
        )
    more = (
        f" (only the newest {MAX_CANDIDATES} vaults with a passphrase, within the key "
        "derivation budget, were tried: use the recovery key)"
        if capped
        else ""
    )
    raise WrongPassphrase(
        f"the passphrase unlocks none of the {tried} vault(s) with a passphrase on {url} for "
        f"agent {agent_id!r}{more}"
    )


def _cost(blob: bytes) -> int:
    """A passphrase wrap's Argon2id work, read from the wrap (a malformed one costs nothing:
    opening it fails before any derivation)."""
    try:
        wrap = crypto.parse_wrap(blob)
    except (crypto.CryptoError, ValueError):
        return 0
    return kdf_cost(wrap.params) if isinstance(wrap, crypto.PassphraseWrap) else 0
