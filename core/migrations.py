"""Numbered, transactional schema migrations (`PRAGMA user_version` is the schema version).

A migration runs inside one transaction together with the version bump, so a failure leaves the
previous version in place. Append new steps; never edit a released one.
"""

from __future__ import annotations

import sqlite3

from tiermem.core.db import Database
from tiermem.core.errors import StorageError

MIGRATIONS: list[str] = [
    # 1: the memory model (warm/cold memories, hot state, tree index).
    """
    CREATE TABLE memories (
        seq INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        text TEXT NOT NULL,
        category TEXT NOT NULL,
        importance REAL NOT NULL CHECK (importance BETWEEN 0 AND 1),
        created_at REAL NOT NULL,
        access_count INTEGER NOT NULL DEFAULT 0,
        last_access REAL,
        tier TEXT NOT NULL CHECK (tier IN ('warm', 'cold', 'frozen')),
        tier_changed_at REAL NOT NULL,
        urls TEXT NOT NULL DEFAULT '',
        commands TEXT NOT NULL DEFAULT '',
        paths TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL DEFAULT '',
        size_bytes INTEGER NOT NULL,
        tokens INTEGER NOT NULL,
        UNIQUE (agent_id, id)
    );
    CREATE TABLE agents (
        agent_id TEXT PRIMARY KEY,
        slot INTEGER NOT NULL UNIQUE CHECK (slot BETWEEN 1 AND 1048575)
    );
    CREATE INDEX memories_tier ON memories (agent_id, tier, category);
    CREATE INDEX memories_created ON memories (agent_id, tier, created_at);
    CREATE VIRTUAL TABLE memories_fts USING fts5(
        text, category, urls, commands, paths,
        content = 'memories', content_rowid = 'seq',
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, text, category, urls, commands, paths)
        VALUES (new.seq, new.text, new.category, new.urls, new.commands, new.paths);
    END;
    CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text, category, urls, commands, paths)
        VALUES ('delete', old.seq, old.text, old.category, old.urls, old.commands, old.paths);
    END;
    CREATE TRIGGER memories_au AFTER UPDATE OF text, category, urls, commands, paths
    ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text, category, urls, commands, paths)
        VALUES ('delete', old.seq, old.text, old.category, old.urls, old.commands, old.paths);
        INSERT INTO memories_fts (rowid, text, category, urls, commands, paths)
        VALUES (new.seq, new.text, new.category, new.urls, new.commands, new.paths);
    END;
    CREATE TABLE hot_state (
        agent_id TEXT PRIMARY KEY,
        data TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE tree_nodes (
        agent_id TEXT NOT NULL,
        path TEXT NOT NULL,
        description TEXT NOT NULL,
        created_at REAL NOT NULL,
        last_activity REAL NOT NULL,
        PRIMARY KEY (agent_id, path)
    );
    CREATE TABLE metrics_daily (
        agent_id TEXT NOT NULL,
        day TEXT NOT NULL,
        retrievals INTEGER NOT NULL DEFAULT 0,
        evictions INTEGER NOT NULL DEFAULT 0,
        promotions INTEGER NOT NULL DEFAULT 0,
        stores INTEGER NOT NULL DEFAULT 0,
        context_tokens INTEGER NOT NULL DEFAULT 0,
        flat_tokens INTEGER NOT NULL DEFAULT 0,
        warm_bytes INTEGER NOT NULL DEFAULT 0,
        warm_count INTEGER NOT NULL DEFAULT 0,
        cold_count INTEGER NOT NULL DEFAULT 0,
        hot_bytes INTEGER NOT NULL DEFAULT 0,
        hot_tokens INTEGER NOT NULL DEFAULT 0,
        tree_nodes INTEGER NOT NULL DEFAULT 0,
        tree_bytes INTEGER NOT NULL DEFAULT 0,
        tree_tokens INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (agent_id, day)
    );
    """,
    # 2: the durable sync outbox: one row per change of critical state (hot + tree) to push.
    """
    CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        reason TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX outbox_agent ON outbox (agent_id, seq);
    """,
    # 3: curation (core/curate.py): pinned memories (consolidation never evicts them), the
    # forgotten archive (a forgotten memory leaves retrieval but is kept, so a forget can be
    # undone), and a bounded access log (the last 20 reinforcements of each memory).
    """
    ALTER TABLE memories ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE forgotten (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        data TEXT NOT NULL,
        forgotten_at REAL NOT NULL,
        PRIMARY KEY (agent_id, id)
    );
    CREATE INDEX forgotten_recent ON forgotten (agent_id, forgotten_at);
    CREATE TABLE access_log (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        at REAL NOT NULL
    );
    CREATE INDEX access_log_memory ON access_log (agent_id, id, at);
    CREATE TRIGGER memories_access AFTER UPDATE OF access_count ON memories
    WHEN new.access_count > old.access_count BEGIN
        INSERT INTO access_log (agent_id, id, at)
        VALUES (new.agent_id, new.id, COALESCE(new.last_access, new.tier_changed_at));
        DELETE FROM access_log WHERE agent_id = new.agent_id AND id = new.id AND rowid NOT IN (
            SELECT rowid FROM access_log WHERE agent_id = new.agent_id AND id = new.id
            ORDER BY at DESC, rowid DESC LIMIT 20
        );
    END;
    CREATE TRIGGER memories_access_gone AFTER DELETE ON memories BEGIN
        DELETE FROM access_log WHERE agent_id = old.agent_id AND id = old.id;
    END;
    """,
    # 4: encrypted sync (sync/engine.py): one row per agent with the non-secret settings
    # (server URL, device id, epoch, the vault key wrapped to this device and to the recovery
    # key / passphrase), the last hybrid-logical-clock version issued, the push in flight (sent
    # again byte for byte until the server confirms it) and the last push / error for status.
    # Secrets (token, device private key) live in the OS keyring or a 0600 file, never here.
    """
    CREATE TABLE sync_state (
        agent_id TEXT PRIMARY KEY,
        status TEXT NOT NULL CHECK (status IN ('pending', 'ready')),
        url TEXT NOT NULL,
        device_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        secret_ref TEXT NOT NULL,
        secret_store TEXT NOT NULL,
        device_wrap BLOB NOT NULL,
        recovery_wrap BLOB NOT NULL,
        passphrase_wrap BLOB,
        registered INTEGER NOT NULL DEFAULT 0,
        hlc TEXT NOT NULL DEFAULT '',
        inflight_version TEXT,
        inflight_envelope BLOB,
        inflight_seq INTEGER,
        inflight_digest TEXT,
        last_digest TEXT,
        last_push_at REAL,
        last_push_version TEXT,
        pushes INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        last_error_at REAL,
        retry_at REAL,
        created_at REAL NOT NULL
    );
    """,
    # 5: the write path (core/ingest.py, core/conversation.py): each source already ingested (a
    # daily note by file name, a conversation by session id or digest) with its content digest,
    # the items it produced (a note line or a distilled fact → the memory it became, and whether
    # it created that memory), and the memories consolidation promoted into hot once (never
    # again: a lesson a person removed from hot is not brought back).
    """
    CREATE TABLE ingest_sources (
        agent_id TEXT NOT NULL,
        source TEXT NOT NULL,
        digest TEXT NOT NULL,
        ingested_at REAL NOT NULL,
        PRIMARY KEY (agent_id, source)
    );
    CREATE TABLE ingest_items (
        agent_id TEXT NOT NULL,
        source TEXT NOT NULL,
        item TEXT NOT NULL,
        memory_id TEXT NOT NULL,
        created INTEGER NOT NULL,
        PRIMARY KEY (agent_id, source, item)
    );
    CREATE INDEX ingest_items_memory ON ingest_items (agent_id, memory_id);
    CREATE TABLE promoted (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        promoted_at REAL NOT NULL,
        PRIMARY KEY (agent_id, id)
    );
    """,
    # 6: the optional vector index (core/vectors.py): one embedding per memory row, with the
    # memory's content id it was computed from (an edit changes the id, so a stale vector is
    # recognisable). A plain table on both drivers; libSQL's vector index on it is created when
    # vector retrieval is first used (stdlib sqlite3 cannot maintain it). No trigger touches it,
    # so deleting memories works on both drivers: orphans are cleaned by the next vector sync.
    """
    CREATE TABLE memory_vectors (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL,
        embedding F32_BLOB(384) NOT NULL
    );
    """,
    # 7: incremental sync of warm/cold/frozen rows (sync/push.py and sync/pull.py, format in sync/records.py).
    # `sync_dirty`: one row per memory id changed since its last push (triggers; a new change
    # takes a new seq, so churn coalesces and a change made while a push is in flight is seen;
    # a dirty id without a row is pushed as a tombstone). Existing rows start dirty so the first
    # push sends them. `sync_versions`: the newest remote version known per memory id (pushed or
    # pulled; kept for deleted ids so an old version never resurrects a row). `sync_outgoing` +
    # `sync_batches`: sealed push requests in flight, resent byte for byte until confirmed.
    # `sync_progress`: pull cursor, this device's manifest counter, pull bookkeeping.
    # `sync_peers`: per other device the highest manifest counter pulled. `sync_log`: history.
    """
    CREATE TABLE sync_dirty (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        UNIQUE (agent_id, id)
    );
    CREATE INDEX sync_dirty_agent ON sync_dirty (agent_id, seq);
    INSERT INTO sync_dirty (agent_id, id) SELECT agent_id, id FROM memories ORDER BY seq;
    CREATE TRIGGER sync_dirty_ai AFTER INSERT ON memories BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) VALUES (new.agent_id, new.id);
    END;
    CREATE TRIGGER sync_dirty_au AFTER UPDATE ON memories BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) VALUES (new.agent_id, new.id);
    END;
    CREATE TRIGGER sync_dirty_au_id AFTER UPDATE OF id ON memories
    WHEN old.id != new.id BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) VALUES (old.agent_id, old.id);
    END;
    CREATE TRIGGER sync_dirty_ad AFTER DELETE ON memories BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) VALUES (old.agent_id, old.id);
    END;
    CREATE TABLE sync_versions (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        version TEXT NOT NULL,
        PRIMARY KEY (agent_id, id)
    );
    CREATE TABLE sync_batches (
        agent_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        version TEXT NOT NULL,
        dirty_up_to INTEGER NOT NULL,
        outbox_up_to INTEGER NOT NULL,
        digest TEXT,
        PRIMARY KEY (agent_id, n)
    );
    CREATE TABLE sync_outgoing (
        agent_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        pos INTEGER NOT NULL,
        tbl TEXT NOT NULL,
        key TEXT NOT NULL,
        record_id BLOB NOT NULL,
        version TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        envelope BLOB NOT NULL,
        PRIMARY KEY (agent_id, n, pos)
    );
    CREATE TABLE sync_progress (
        agent_id TEXT PRIMARY KEY,
        pull_cursor INTEGER NOT NULL DEFAULT 0,
        manifest_n INTEGER NOT NULL DEFAULT 0,
        critical_version TEXT NOT NULL DEFAULT '',
        last_pull_at REAL,
        last_pull_records INTEGER NOT NULL DEFAULT 0,
        pulls INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE sync_peers (
        agent_id TEXT NOT NULL,
        device_id TEXT NOT NULL,
        last_n INTEGER NOT NULL,
        last_version TEXT NOT NULL,
        PRIMARY KEY (agent_id, device_id)
    );
    CREATE TABLE sync_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        at REAL NOT NULL,
        kind TEXT NOT NULL,
        version TEXT,
        records INTEGER NOT NULL DEFAULT 0,
        bytes INTEGER NOT NULL DEFAULT 0,
        note TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX sync_log_agent ON sync_log (agent_id, seq);
    """,
    # 8: agent integration (core/hygiene/): the agent's sessions in the order first
    # seen, which memories each session recalled (promotion after 3 distinct sessions), when
    # each hot lesson was last used (demotion after 3 sessions unused) and its pin, the log of
    # promotions / demotions / archivals, and per memory the tags and expiry given by
    # `memory_store` (an expired memory is archived to cold).
    """
    CREATE TABLE sessions (
        agent_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        n INTEGER NOT NULL,
        first_seen REAL NOT NULL,
        ended_at REAL,
        PRIMARY KEY (agent_id, session_id)
    );
    CREATE TABLE session_access (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY (agent_id, id, session_id)
    );
    CREATE TABLE hot_tracking (
        agent_id TEXT NOT NULL,
        lesson_id TEXT NOT NULL,
        last_n INTEGER NOT NULL,
        last_access REAL,
        pinned INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (agent_id, lesson_id)
    );
    CREATE TABLE hygiene_log (
        agent_id TEXT NOT NULL,
        at REAL NOT NULL,
        action TEXT NOT NULL,
        item TEXT NOT NULL,
        text TEXT NOT NULL,
        reason TEXT NOT NULL
    );
    CREATE INDEX hygiene_log_at ON hygiene_log (agent_id, at);
    CREATE TABLE memory_extras (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '',
        expires_at REAL,
        PRIMARY KEY (agent_id, id)
    );
    CREATE INDEX memory_extras_expiry ON memory_extras (agent_id, expires_at);
    """,
    # 9: merging critical state between devices (core/clocks.py, core/conflicts.py,
    # sync/merge.py). `crit_clocks`: per agent, item (`identity`, `lesson/<id>`, `tree/<path>`,
    # ...) and field, the hybrid-logical-clock stamp of its last change, the writer ('' = this
    # device) and a digest of the value ('' = deleted), so a change is stamped when it happens.
    # `crit_seen`: per writer device the newest stamp merged in (a version vector: a value
    # overwritten by a writer that had seen it is not a conflict). `conflicts`: values that lost
    # a merge (or were pruned to keep a limit), kept until resolved.
    """
    CREATE TABLE crit_clocks (
        agent_id TEXT NOT NULL,
        item TEXT NOT NULL,
        field TEXT NOT NULL,
        stamp TEXT NOT NULL,
        device TEXT NOT NULL,
        digest TEXT NOT NULL,
        PRIMARY KEY (agent_id, item, field)
    );
    CREATE TABLE crit_seen (
        agent_id TEXT NOT NULL,
        device TEXT NOT NULL,
        stamp TEXT NOT NULL,
        PRIMARY KEY (agent_id, device)
    );
    CREATE TABLE conflicts (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        item TEXT NOT NULL,
        field TEXT NOT NULL,
        kept_value TEXT NOT NULL,
        lost_value TEXT NOT NULL,
        kept_version TEXT NOT NULL,
        lost_version TEXT NOT NULL,
        lost_device TEXT NOT NULL,
        reason TEXT NOT NULL DEFAULT '',
        detected_at REAL NOT NULL,
        resolved_at REAL,
        resolution TEXT,
        PRIMARY KEY (agent_id, id)
    );
    CREATE INDEX conflicts_recent ON conflicts (agent_id, detected_at);
    """,
    # N: full restore (sync/restore/). `restore_progress`: one row per agent whose critical
    # state is restored but whose memories are still streaming (the home is usable meanwhile):
    # the vault and point in time it restores, and the remote cursor of the last committed page,
    # so a rerun continues there. `restore_staging`: the newest version per memory id streamed so
    # far (or a tombstone), moved into `memories` in one transaction when the last page is in.
    """
    CREATE TABLE restore_progress (
        agent_id TEXT PRIMARY KEY,
        url TEXT NOT NULL,
        vault_check TEXT NOT NULL,
        at TEXT,
        version TEXT NOT NULL,
        cursor INTEGER NOT NULL DEFAULT 0,
        rows INTEGER NOT NULL DEFAULT 0,
        pages INTEGER NOT NULL DEFAULT 0,
        bytes INTEGER NOT NULL DEFAULT 0,
        started_at REAL NOT NULL
    );
    CREATE TABLE restore_staging (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        version TEXT NOT NULL,
        deleted INTEGER NOT NULL,
        text TEXT,
        category TEXT,
        importance REAL,
        created_at REAL,
        access_count INTEGER,
        last_access REAL,
        tier TEXT,
        tier_changed_at REAL,
        urls TEXT,
        commands TEXT,
        paths TEXT,
        source TEXT,
        size_bytes INTEGER,
        tokens INTEGER,
        pinned INTEGER,
        PRIMARY KEY (agent_id, id)
    );
    """,
    # MEMORY.md after a crash (core/memory_md.py): the digest of the MEMORY.md rendering of the
    # hot state as it was before its last save. A process killed between that save's commit and
    # the rewrite of MEMORY.md leaves exactly that file behind; read back, it is recognised as
    # stale and rewritten, not taken for a hand edit that would undo the committed save.
    """
    ALTER TABLE hot_state ADD COLUMN previous_render TEXT NOT NULL DEFAULT '';
    """,
    # Device roster and epoch floor (sync/roster.py, sync/keys.py): the highest key epoch this
    # device has authenticated (it never seals under an older one) and the roster it verified
    # (hash of its first entry, the newest entry's number and hash), so a server can neither
    # swap the roster nor show less of it later.
    """
    ALTER TABLE sync_state ADD COLUMN epoch_floor INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sync_state ADD COLUMN roster_genesis BLOB;
    ALTER TABLE sync_state ADD COLUMN roster_seq INTEGER;
    ALTER TABLE sync_state ADD COLUMN roster_head BLOB;
    """,
    # Reads never create versions; ids stable across edits (core/reinforce.py, core/curate.py,
    # sync/seal.py). `reinforcement`: per memory and device ('' = this one) a grow-only read
    # count and the newest read, merged between devices, the row keeping the total;
    # `reinforce_dirty`: memories whose local counters changed since their last push. The
    # upload mark of `memories` follows real changes only (not access count or last access).
    # `sync_batches.counts_up_to` and `sync_outgoing.changed` (the content version a record
    # that only carries counters stands for). `memory_aliases`: every other text a memory
    # had or got by an edit (its content id → the memory), so storing it again reinforces
    # the memory. `vector_stale`: rows whose text changed since their embedding.
    """
    CREATE TABLE reinforcement (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        device TEXT NOT NULL,
        count INTEGER NOT NULL CHECK (count >= 0),
        last_access REAL,
        PRIMARY KEY (agent_id, id, device)
    );
    CREATE TABLE reinforce_dirty (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        UNIQUE (agent_id, id)
    );
    CREATE TRIGGER reinforcement_local_ai AFTER INSERT ON reinforcement
    WHEN new.device = '' BEGIN
        DELETE FROM reinforce_dirty WHERE agent_id = new.agent_id AND id = new.id;
        INSERT INTO reinforce_dirty (agent_id, id) VALUES (new.agent_id, new.id);
    END;
    CREATE TRIGGER reinforcement_local_au AFTER UPDATE ON reinforcement
    WHEN new.device = '' BEGIN
        DELETE FROM reinforce_dirty WHERE agent_id = new.agent_id AND id = new.id;
        INSERT INTO reinforce_dirty (agent_id, id) VALUES (new.agent_id, new.id);
    END;
    DROP TRIGGER sync_dirty_au;
    CREATE TRIGGER sync_dirty_au AFTER UPDATE ON memories
    WHEN old.id IS NOT new.id OR old.text IS NOT new.text OR old.category IS NOT new.category
        OR old.importance IS NOT new.importance OR old.created_at IS NOT new.created_at
        OR old.tier IS NOT new.tier OR old.tier_changed_at IS NOT new.tier_changed_at
        OR old.urls IS NOT new.urls OR old.commands IS NOT new.commands
        OR old.paths IS NOT new.paths OR old.source IS NOT new.source
        OR old.size_bytes IS NOT new.size_bytes OR old.tokens IS NOT new.tokens
        OR old.pinned IS NOT new.pinned BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) VALUES (new.agent_id, new.id);
    END;
    ALTER TABLE sync_batches ADD COLUMN counts_up_to INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sync_outgoing ADD COLUMN changed TEXT;
    CREATE TABLE memory_aliases (
        agent_id TEXT NOT NULL,
        alias TEXT NOT NULL,
        id TEXT NOT NULL,
        PRIMARY KEY (agent_id, alias)
    );
    CREATE TABLE vector_stale (seq INTEGER PRIMARY KEY);
    CREATE TRIGGER memories_text_changed AFTER UPDATE OF text ON memories
    WHEN old.text IS NOT new.text BEGIN
        INSERT OR IGNORE INTO vector_stale (seq) VALUES (new.seq);
    END;
    """,
    # Links, working memory, procedural skills, session re-access (core/links.py,
    # core/working.py, core/skills.py, core/hygiene/). `memory_links`: `related_to` links
    # between two memories of an agent (stored once, a < b). `working_memory`: per session the
    # agent's scratch state for the task at hand (a JSON object, cleared at conversation end).
    # `action_sequences`: per conversation the commands and tool calls it made, in order.
    # `skills`: skills proposed from sequences repeated across conversations, and the owner's
    # verdict. `hot_provenance`: why and when a memory was promoted into a hot lesson.
    # `session_access.hits`: how often a session re-accessed a memory.
    """
    CREATE TABLE memory_links (
        agent_id TEXT NOT NULL,
        a TEXT NOT NULL,
        b TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (agent_id, a, b),
        CHECK (a < b)
    );
    CREATE INDEX memory_links_b ON memory_links (agent_id, b);
    CREATE TABLE working_memory (
        agent_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        data TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (agent_id, session_id)
    );
    CREATE TABLE action_sequences (
        agent_id TEXT NOT NULL,
        source TEXT NOT NULL,
        actions TEXT NOT NULL,
        at REAL NOT NULL,
        PRIMARY KEY (agent_id, source)
    );
    CREATE TABLE skills (
        agent_id TEXT NOT NULL,
        name TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('proposed', 'accepted', 'rejected')),
        spec TEXT NOT NULL,
        pattern TEXT NOT NULL,
        conversations INTEGER NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (agent_id, name)
    );
    CREATE UNIQUE INDEX skills_pattern ON skills (agent_id, pattern);
    CREATE TABLE hot_provenance (
        agent_id TEXT NOT NULL,
        source_id TEXT NOT NULL,
        promoted_at REAL NOT NULL,
        why TEXT NOT NULL,
        PRIMARY KEY (agent_id, source_id)
    );
    ALTER TABLE session_access ADD COLUMN hits INTEGER NOT NULL DEFAULT 1;
    """,
    # Sync against a hostile server: `sync_rejected` lists remote rows that failed
    # authentication (fetched again by every pull until they authenticate or a newer version
    # replaces them); `sync_transport` remembers an explicit `--insecure-http`; daily metrics
    # synced: `sync_metrics` holds every other device's share, `sync_metrics_pushed` the
    # digest of this device's share last sealed.
    """
    CREATE TABLE sync_rejected (
        agent_id TEXT NOT NULL,
        record_id BLOB NOT NULL,
        version TEXT NOT NULL,
        seq INTEGER NOT NULL,
        reason TEXT NOT NULL,
        first_at REAL NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 1,
        PRIMARY KEY (agent_id, record_id, version)
    );
    CREATE TABLE sync_transport (
        agent_id TEXT PRIMARY KEY,
        insecure_http INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE sync_metrics (
        agent_id TEXT NOT NULL,
        device_id TEXT NOT NULL,
        day TEXT NOT NULL,
        version TEXT NOT NULL,
        retrievals INTEGER NOT NULL DEFAULT 0,
        evictions INTEGER NOT NULL DEFAULT 0,
        promotions INTEGER NOT NULL DEFAULT 0,
        stores INTEGER NOT NULL DEFAULT 0,
        context_tokens INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (agent_id, device_id, day)
    );
    CREATE TABLE sync_metrics_pushed (
        agent_id TEXT PRIMARY KEY,
        digest TEXT NOT NULL
    );
    """,
    # Sync change tracking only for agents set up to sync: the triggers that mark memories and
    # read counters for upload fire only while the agent has a `sync_state` row, and the marks
    # of agents without one go (`sync.state.insert_settings` marks an agent's memories when
    # sync is set up, joined or restored, so the first push still sends them all).
    """
    DROP TRIGGER sync_dirty_ai;
    CREATE TRIGGER sync_dirty_ai AFTER INSERT ON memories
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) VALUES (new.agent_id, new.id);
    END;
    DROP TRIGGER sync_dirty_au;
    CREATE TRIGGER sync_dirty_au AFTER UPDATE ON memories
    WHEN (old.id IS NOT new.id OR old.text IS NOT new.text OR old.category IS NOT new.category
        OR old.importance IS NOT new.importance OR old.created_at IS NOT new.created_at
        OR old.tier IS NOT new.tier OR old.tier_changed_at IS NOT new.tier_changed_at
        OR old.urls IS NOT new.urls OR old.commands IS NOT new.commands
        OR old.paths IS NOT new.paths OR old.source IS NOT new.source
        OR old.size_bytes IS NOT new.size_bytes OR old.tokens IS NOT new.tokens
        OR old.pinned IS NOT new.pinned)
        AND EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) VALUES (new.agent_id, new.id);
    END;
    DROP TRIGGER sync_dirty_au_id;
    CREATE TRIGGER sync_dirty_au_id AFTER UPDATE OF id ON memories
    WHEN old.id != new.id
        AND EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = old.agent_id) BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) VALUES (old.agent_id, old.id);
    END;
    DROP TRIGGER sync_dirty_ad;
    CREATE TRIGGER sync_dirty_ad AFTER DELETE ON memories
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = old.agent_id) BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) VALUES (old.agent_id, old.id);
    END;
    DROP TRIGGER reinforcement_local_ai;
    CREATE TRIGGER reinforcement_local_ai AFTER INSERT ON reinforcement
    WHEN new.device = ''
        AND EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        DELETE FROM reinforce_dirty WHERE agent_id = new.agent_id AND id = new.id;
        INSERT INTO reinforce_dirty (agent_id, id) VALUES (new.agent_id, new.id);
    END;
    DROP TRIGGER reinforcement_local_au;
    CREATE TRIGGER reinforcement_local_au AFTER UPDATE ON reinforcement
    WHEN new.device = ''
        AND EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        DELETE FROM reinforce_dirty WHERE agent_id = new.agent_id AND id = new.id;
        INSERT INTO reinforce_dirty (agent_id, id) VALUES (new.agent_id, new.id);
    END;
    DELETE FROM sync_dirty WHERE agent_id NOT IN (SELECT agent_id FROM sync_state);
    DELETE FROM reinforce_dirty WHERE agent_id NOT IN (SELECT agent_id FROM sync_state);
    """,
    # Episodic memory and the knowledge graph (core/episodes.py, core/graph/): one episode per
    # conversation with its own keyword index and expiry; entities with their names and aliases,
    # relations with a validity window, mentions linking entities to memories and episodes, and
    # how far graph indexing and dreaming have got per agent.
    """
    CREATE TABLE episodes (
        seq INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        source TEXT NOT NULL,
        summary TEXT NOT NULL,
        abstract TEXT NOT NULL,
        topics TEXT NOT NULL DEFAULT '',
        participants TEXT NOT NULL DEFAULT '',
        fact_ids TEXT NOT NULL DEFAULT '',
        started_at REAL NOT NULL,
        ended_at REAL NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        promoted_at REAL,
        UNIQUE (agent_id, id),
        UNIQUE (agent_id, source)
    );
    CREATE INDEX episodes_promoted ON episodes (agent_id, promoted_at, created_at);
    CREATE VIRTUAL TABLE episodes_fts USING fts5(
        summary, topics, participants,
        content = 'episodes', content_rowid = 'seq',
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER episodes_ai AFTER INSERT ON episodes BEGIN
        INSERT INTO episodes_fts (rowid, summary, topics, participants)
        VALUES (new.seq, new.summary, new.topics, new.participants);
    END;
    CREATE TRIGGER episodes_ad AFTER DELETE ON episodes BEGIN
        INSERT INTO episodes_fts (episodes_fts, rowid, summary, topics, participants)
        VALUES ('delete', old.seq, old.summary, old.topics, old.participants);
    END;
    CREATE TRIGGER episodes_au AFTER UPDATE OF summary, topics, participants ON episodes BEGIN
        INSERT INTO episodes_fts (episodes_fts, rowid, summary, topics, participants)
        VALUES ('delete', old.seq, old.summary, old.topics, old.participants);
        INSERT INTO episodes_fts (rowid, summary, topics, participants)
        VALUES (new.seq, new.summary, new.topics, new.participants);
    END;
    CREATE TABLE entities (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (agent_id, id)
    );
    CREATE TABLE entity_names (
        agent_id TEXT NOT NULL,
        key TEXT NOT NULL,
        entity_id TEXT NOT NULL,
        name TEXT NOT NULL,
        PRIMARY KEY (agent_id, key)
    );
    CREATE INDEX entity_names_entity ON entity_names (agent_id, entity_id);
    CREATE TABLE relations (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        subject TEXT NOT NULL,
        predicate TEXT NOT NULL,
        object TEXT NOT NULL,
        valid_from REAL,
        valid_to REAL,
        source TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        PRIMARY KEY (agent_id, id)
    );
    CREATE INDEX relations_subject ON relations (agent_id, subject, predicate);
    CREATE INDEX relations_object ON relations (agent_id, object);
    CREATE TABLE mentions (
        agent_id TEXT NOT NULL,
        entity_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('memory', 'episode')),
        ref TEXT NOT NULL,
        PRIMARY KEY (agent_id, entity_id, kind, ref)
    );
    CREATE INDEX mentions_ref ON mentions (agent_id, kind, ref);
    CREATE TABLE graph_progress (
        agent_id TEXT PRIMARY KEY,
        memory_seq INTEGER NOT NULL DEFAULT 0,
        dreamed_at REAL NOT NULL DEFAULT 0
    );
    """,
    # Episodes and the graph synced (sync/graphsync.py, core/graph/store.py): `graph_dirty`,
    # the episodes and entities changed since their last push (an entity's record carries its
    # names, the relations it is the subject of and its mentions, so those mark it too);
    # `graph_gone`, entities merged into another (or deleted), so that no device brings them
    # back; `sync_batches.graph_up_to`, the dirty mark a push batch covers. Like the memories'
    # marks, only for agents that sync (`sync.state.insert_settings` marks the rest on set-up).
    """
    CREATE TABLE graph_dirty (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('episode', 'entity')),
        id TEXT NOT NULL,
        UNIQUE (agent_id, kind, id)
    );
    INSERT INTO graph_dirty (agent_id, kind, id) SELECT agent_id, 'episode', id FROM episodes
        WHERE agent_id IN (SELECT agent_id FROM sync_state);
    INSERT INTO graph_dirty (agent_id, kind, id) SELECT agent_id, 'entity', id FROM entities
        WHERE agent_id IN (SELECT agent_id FROM sync_state);
    CREATE TABLE graph_gone (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        merged_into TEXT,
        PRIMARY KEY (agent_id, id)
    );
    ALTER TABLE sync_batches ADD COLUMN graph_up_to INTEGER NOT NULL DEFAULT 0;
    CREATE TRIGGER graph_dirty_episodes_ai AFTER INSERT ON episodes
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = new.agent_id AND kind = 'episode' AND id = new.id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (new.agent_id, 'episode', new.id);
    END;
    CREATE TRIGGER graph_dirty_entities_ai AFTER INSERT ON entities
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = new.agent_id AND kind = 'entity' AND id = new.id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (new.agent_id, 'entity', new.id);
    END;
    CREATE TRIGGER graph_dirty_names_ai AFTER INSERT ON entity_names
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = new.agent_id AND kind = 'entity' AND id = new.entity_id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (new.agent_id, 'entity', new.entity_id);
    END;
    CREATE TRIGGER graph_dirty_relations_ai AFTER INSERT ON relations
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = new.agent_id AND kind = 'entity' AND id = new.subject;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (new.agent_id, 'entity', new.subject);
    END;
    CREATE TRIGGER graph_dirty_mentions_ai AFTER INSERT ON mentions
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = new.agent_id AND kind = 'entity' AND id = new.entity_id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (new.agent_id, 'entity', new.entity_id);
    END;
    CREATE TRIGGER graph_dirty_episodes_au AFTER UPDATE ON episodes
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = new.agent_id AND kind = 'episode' AND id = new.id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (new.agent_id, 'episode', new.id);
    END;
    CREATE TRIGGER graph_dirty_entities_au AFTER UPDATE ON entities
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = new.agent_id AND kind = 'entity' AND id = new.id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (new.agent_id, 'entity', new.id);
    END;
    CREATE TRIGGER graph_dirty_names_au AFTER UPDATE ON entity_names
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = new.agent_id AND kind = 'entity' AND id = new.entity_id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (new.agent_id, 'entity', new.entity_id);
    END;
    CREATE TRIGGER graph_dirty_relations_au AFTER UPDATE ON relations
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = new.agent_id AND kind = 'entity' AND id = new.subject;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (new.agent_id, 'entity', new.subject);
    END;
    CREATE TRIGGER graph_dirty_mentions_au AFTER UPDATE ON mentions
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = new.agent_id AND kind = 'entity' AND id = new.entity_id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (new.agent_id, 'entity', new.entity_id);
    END;
    CREATE TRIGGER graph_dirty_names_au_old AFTER UPDATE ON entity_names
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = old.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = old.agent_id AND kind = 'entity' AND id = old.entity_id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (old.agent_id, 'entity', old.entity_id);
    END;
    CREATE TRIGGER graph_dirty_relations_au_old AFTER UPDATE ON relations
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = old.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = old.agent_id AND kind = 'entity' AND id = old.subject;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (old.agent_id, 'entity', old.subject);
    END;
    CREATE TRIGGER graph_dirty_mentions_au_old AFTER UPDATE ON mentions
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = old.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = old.agent_id AND kind = 'entity' AND id = old.entity_id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (old.agent_id, 'entity', old.entity_id);
    END;
    CREATE TRIGGER graph_dirty_episodes_ad AFTER DELETE ON episodes
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = old.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = old.agent_id AND kind = 'episode' AND id = old.id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (old.agent_id, 'episode', old.id);
    END;
    CREATE TRIGGER graph_dirty_entities_ad AFTER DELETE ON entities
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = old.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = old.agent_id AND kind = 'entity' AND id = old.id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (old.agent_id, 'entity', old.id);
    END;
    CREATE TRIGGER graph_dirty_names_ad AFTER DELETE ON entity_names
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = old.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = old.agent_id AND kind = 'entity' AND id = old.entity_id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (old.agent_id, 'entity', old.entity_id);
    END;
    CREATE TRIGGER graph_dirty_relations_ad AFTER DELETE ON relations
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = old.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = old.agent_id AND kind = 'entity' AND id = old.subject;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (old.agent_id, 'entity', old.subject);
    END;
    CREATE TRIGGER graph_dirty_mentions_ad AFTER DELETE ON mentions
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = old.agent_id) BEGIN
        DELETE FROM graph_dirty
        WHERE agent_id = old.agent_id AND kind = 'entity' AND id = old.entity_id;
        INSERT INTO graph_dirty (agent_id, kind, id) VALUES (old.agent_id, 'entity', old.entity_id);
    END;
    """,
    # Keyed agent tags (sync/state.py): the tag the server files this vault's rows under, an
    # HMAC of the agent id under a key derived from the recovery key; NULL for a vault set up
    # before, which keeps the unkeyed hash of the agent id.
    """
    ALTER TABLE sync_state ADD COLUMN agent_tag BLOB;
    """,
    # Token counts are derived from the text and may be filled in by a later read: storing a
    # count is not a change to upload (a new version would outrank a concurrent forget).
    """
    DROP TRIGGER sync_dirty_au;
    CREATE TRIGGER sync_dirty_au AFTER UPDATE ON memories
    WHEN (old.id IS NOT new.id OR old.text IS NOT new.text OR old.category IS NOT new.category
        OR old.importance IS NOT new.importance OR old.created_at IS NOT new.created_at
        OR old.tier IS NOT new.tier OR old.tier_changed_at IS NOT new.tier_changed_at
        OR old.urls IS NOT new.urls OR old.commands IS NOT new.commands
        OR old.paths IS NOT new.paths OR old.source IS NOT new.source
        OR old.size_bytes IS NOT new.size_bytes OR old.pinned IS NOT new.pinned)
        AND EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) VALUES (new.agent_id, new.id);
    END;
    """,
    # Tags, expiry and links in the memory's sync record (sync/extras.py, sync/records.py): a
    # change of them marks the memory for upload (both memories of a link), for agents that
    # sync and memories that exist (a mark without a row would be pushed as a tombstone).
    # `restore_staging.extras`: the tags, expiry and links a staged record carries (JSON).
    """
    ALTER TABLE restore_staging ADD COLUMN extras TEXT;
    CREATE TRIGGER sync_dirty_extras_ai AFTER INSERT ON memory_extras
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) SELECT m.agent_id, m.id FROM memories m
        WHERE m.agent_id = new.agent_id AND m.id IN (new.id);
    END;
    CREATE TRIGGER sync_dirty_extras_au AFTER UPDATE ON memory_extras
    WHEN (old.tags IS NOT new.tags OR old.expires_at IS NOT new.expires_at)
        AND EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) SELECT m.agent_id, m.id FROM memories m
        WHERE m.agent_id = new.agent_id AND m.id IN (old.id, new.id);
    END;
    CREATE TRIGGER sync_dirty_extras_ad AFTER DELETE ON memory_extras
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = old.agent_id) BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) SELECT m.agent_id, m.id FROM memories m
        WHERE m.agent_id = old.agent_id AND m.id IN (old.id);
    END;
    CREATE TRIGGER sync_dirty_links_ai AFTER INSERT ON memory_links
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) SELECT m.agent_id, m.id FROM memories m
        WHERE m.agent_id = new.agent_id AND m.id IN (new.a, new.b);
    END;
    CREATE TRIGGER sync_dirty_links_au AFTER UPDATE OF a, b ON memory_links
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) SELECT m.agent_id, m.id FROM memories m
        WHERE m.agent_id = new.agent_id AND m.id IN (old.a, old.b, new.a, new.b);
    END;
    CREATE TRIGGER sync_dirty_links_ad AFTER DELETE ON memory_links
    WHEN EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = old.agent_id) BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) SELECT m.agent_id, m.id FROM memories m
        WHERE m.agent_id = old.agent_id AND m.id IN (old.a, old.b);
    END;
    """,
    # Facts that change (core/supersession.py): `valid_from`, when a memory's fact became true
    # (a date its text names, else NULL: its `created_at`); `superseded_by`, the memory that
    # replaced it ('' when none) and `superseded_at`, when it stopped being true (NULL while
    # it is current; set without a successor when a fact was closed, "I no longer …"). They
    # travel in the memory's sync record, so a change marks it for upload.
    """
    ALTER TABLE memories ADD COLUMN valid_from REAL;
    ALTER TABLE memories ADD COLUMN superseded_by TEXT NOT NULL DEFAULT '';
    ALTER TABLE memories ADD COLUMN superseded_at REAL;
    ALTER TABLE restore_staging ADD COLUMN valid_from REAL;
    ALTER TABLE restore_staging ADD COLUMN superseded_by TEXT;
    ALTER TABLE restore_staging ADD COLUMN superseded_at REAL;
    CREATE INDEX memories_superseded ON memories (agent_id, superseded_at)
        WHERE superseded_at IS NOT NULL;
    DROP TRIGGER sync_dirty_au;
    CREATE TRIGGER sync_dirty_au AFTER UPDATE ON memories
    WHEN (old.id IS NOT new.id OR old.text IS NOT new.text OR old.category IS NOT new.category
        OR old.importance IS NOT new.importance OR old.created_at IS NOT new.created_at
        OR old.tier IS NOT new.tier OR old.tier_changed_at IS NOT new.tier_changed_at
        OR old.urls IS NOT new.urls OR old.commands IS NOT new.commands
        OR old.paths IS NOT new.paths OR old.source IS NOT new.source
        OR old.size_bytes IS NOT new.size_bytes OR old.pinned IS NOT new.pinned
        OR old.valid_from IS NOT new.valid_from OR old.superseded_by IS NOT new.superseded_by
        OR old.superseded_at IS NOT new.superseded_at)
        AND EXISTS (SELECT 1 FROM sync_state s WHERE s.agent_id = new.agent_id) BEGIN
        INSERT OR REPLACE INTO sync_dirty (agent_id, id) VALUES (new.agent_id, new.id);
    END;
    """,
    # 23: `sync_memory_base`, per memory the content this device last pushed or pulled (the
    # base a local edit starts from): its content version, the versions it holds per device
    # (`history`), each field group's last change (`clocks`) and its values (`content`, NULL
    # for a tombstone). A pull compares a remote version with it to merge edits of different
    # fields and to keep a clashing value as a conflict instead of losing it.
    """
    CREATE TABLE sync_memory_base (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        version TEXT NOT NULL,
        history TEXT NOT NULL,
        clocks TEXT NOT NULL,
        content TEXT,
        PRIMARY KEY (agent_id, id)
    ) WITHOUT ROWID;
    """,
    # v24: shared memory spaces (core/spaces.py). A space's memories are rows of the scope
    # `space:NAME` in every table, like an agent's; `spaces` names them, `space_members` says
    # which agents include which space with what role, `space_writers` which member wrote each
    # memory of a space (and whether `spaces undo` archived it).
    """
    CREATE TABLE spaces (
        name TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        created_by TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE space_members (
        agent_id TEXT NOT NULL,
        space TEXT NOT NULL REFERENCES spaces (name) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('writer', 'reader')),
        included_at REAL NOT NULL,
        PRIMARY KEY (agent_id, space)
    ) WITHOUT ROWID;
    CREATE TABLE space_writers (
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        writer TEXT NOT NULL,
        device TEXT NOT NULL DEFAULT '',
        written_at REAL NOT NULL,
        undone_at REAL,
        PRIMARY KEY (agent_id, id)
    ) WITHOUT ROWID;
    CREATE INDEX space_writers_by ON space_writers (agent_id, writer, written_at);
    """,
    # v25: `sync_checkpoint`, the sealed parts of the vault's checkpoint this device last wrote
    # or read (sync/restore/checkpoint.py): the next prune builds on them instead of downloading
    # the checkpoint again, once the server's parts match them. `vault` is the agent tag.
    """
    CREATE TABLE sync_checkpoint (
        agent_id TEXT NOT NULL,
        vault BLOB NOT NULL,
        version TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        device_id BLOB NOT NULL,
        envelope BLOB NOT NULL,
        PRIMARY KEY (agent_id, version)
    );
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(db: Database) -> int:
    return int(db.scalar("PRAGMA user_version"))


def migrate(db: Database, migrations: list[str] | None = None) -> int:
    """Bring the database to the newest version; returns the version reached."""
    steps = MIGRATIONS if migrations is None else migrations
    current = schema_version(db)
    if current > len(steps):
        raise StorageError(
            f"database schema version {current} is newer than this tiermem ({len(steps)}); "
            "upgrade tiermem"
        )
    for version in range(current + 1, len(steps) + 1):
        with db.transaction():
            for statement in split_statements(steps[version - 1]):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {version}")
    return schema_version(db)


def split_statements(script: str) -> list[str]:
    """Split a script into complete statements (trigger bodies kept whole).

    `executescript` cannot be used: stdlib sqlite3 commits any open transaction before it runs,
    which would make a migration non-atomic; and libsql's `execute` silently ignores all but
    the first statement of a string.
    """
    statements: list[str] = []
    start = 0
    for end, char in enumerate(script):
        if char == ";" and sqlite3.complete_statement(script[start : end + 1]):
            statement = script[start : end + 1].strip()
            if statement != ";":
                statements.append(statement)
            start = end + 1
    rest = script[start:].strip()
    if rest:
        raise ValueError(f"incomplete SQL statement in migration: {rest[:60]}")
    return statements
