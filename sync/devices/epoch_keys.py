"""Vault keys by epoch for reading many records: the restore's and prune's key ring."""

from __future__ import annotations

from collections.abc import Callable

from tiermem.sync import crypto, records
from tiermem.sync.devices import epochs
from tiermem.sync.session import Session
from tiermem.sync.vault.hrana import Args, ResultSet


class KeyRing:
    """Vault keys by epoch and the id key (epoch 1's key: record ids never change).

    `key_for` gives the key of an epoch: in a restore, the newest epoch's key comes from the
    recovery key or passphrase and older ones from the chain wraps a key rotation leaves
    (`epochs.unlock_chain`); in a set-up home, from `epochs.epoch_key`."""

    def __init__(self, agent_id: str, key_for: Callable[[int], bytes]) -> None:
        self.agent_id = agent_id
        self._key_for = key_for
        self._keys: dict[int, bytes] = {}
        self._memory_rid: Callable[[str | bytes], bytes] | None = None
        self.verify: records.Verifier | None = None
        """A shared space's vault: the check of its writers' signatures (`spaces.authors`)."""

    def key(self, epoch: int) -> bytes:
        found = self._keys.get(epoch)
        if found is None:
            found = self._keys[epoch] = self._key_for(epoch)
        return found

    @property
    def id_key(self) -> bytes:
        return self.key(epochs.ID_EPOCH)

    def memory_rid(self, memory_id: str) -> bytes:
        """`records.record_id(id_key, "memory", memory_id)`, with the index key derived once
        (deriving it is most of the cost of a record id, paid per row otherwise)."""
        if self._memory_rid is None:
            self._memory_rid = crypto.record_id_hasher(self.id_key, records.MEMORY_TABLE)
        return self._memory_rid(memory_id)

    @classmethod
    def unlocked(
        cls,
        agent_id: str,
        epoch: int,
        key: bytes,
        select: Callable[[str, Args], ResultSet],
        tag: bytes,
    ) -> KeyRing:
        chains: dict[int, bytes] = {}

        def key_for(wanted: int) -> bytes:
            if wanted == epoch:
                return key
            if not epochs.ID_EPOCH <= wanted < epoch:
                raise crypto.TamperedData(
                    f"a record names key epoch {wanted}, but this vault's newest is {epoch}"
                )
            if not chains:
                rows = select(
                    "SELECT epoch, blob FROM key_wraps WHERE agent_tag = ? AND kind = 'chain'",
                    (tag,),
                ).rows
                chains.update({records.server_int(e): records.server_blob(b) for e, b in rows})
            return epochs.unlock_chain(agent_id, tag, epoch, key, chains, wanted)[wanted]

        return cls(agent_id, key_for)

    @classmethod
    def of_engine(cls, engine: Session) -> KeyRing:
        return cls(engine.agent_id, lambda epoch: epochs.epoch_key(engine, epoch))
