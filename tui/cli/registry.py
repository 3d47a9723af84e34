"""Every command of `tiermem` and `tiermem sync`: its module, its click object and its help line.

The help line is what `--help` lists without importing the module; tests/tui/test_cli_lazy.py
checks that it matches the command's own docstring. `resident` says whether the resident
process (`tiermem resident`) may run the command (`tiermem.tui.cli.lazy.HandOver`).
"""

from __future__ import annotations

from tiermem.tui.cli.lazy import HandOver, Lazy

PACKAGE = "tiermem.tui.cli.commands"


def _at(module: str, attribute: str, help_line: str, resident: HandOver = "never") -> Lazy:
    return Lazy(f"{PACKAGE}.{module}", attribute, help_line, resident)


def _sub(
    module: str, attribute: str, help_line: str, resident: HandOver = "unless-terminal"
) -> Lazy:
    """A `sync` subcommand: as its group unless it says otherwise (a server it runs is not)."""
    return _at(module, attribute, help_line, resident)


ROOT: dict[str, Lazy] = {
    # memory: store, find, read
    "store": _at(
        "memory",
        "store",
        "Store a fact in warm memory (storing a known fact reinforces it instead).",
        resident="always",
    ),
    "retrieve": _at(
        "memory",
        "retrieve",
        "Find memories through the tree, with the reason each was found.",
        resident="always",
    ),
    "cold": _at(
        "memory", "cold", "Search the cold archive (cold and frozen facts).", resident="always"
    ),
    "supersede": _at(
        "changes",
        "supersede",
        "Mark memory OLD replaced by NEW (without NEW: no longer true); it stays, ranked below.",
        resident="always",
    ),
    "unsupersede": _at(
        "changes",
        "unsupersede",
        "Make a superseded memory current again (undo a wrong supersession).",
        resident="always",
    ),
    "history": _at(
        "changes",
        "history",
        "Show the chain a memory belongs to: what it replaced and what replaced it, oldest first.",
        resident="always",
    ),
    "changes": _at(
        "changes",
        "changes",
        "List the facts that changed since a date: old → new, when, and where the new one came "
        "from.",
        resident="always",
    ),
    "get": _at("memory", "get", "Show one memory with its metadata and score.", resident="always"),
    "edit": _at(
        "edit",
        "edit",
        "Edit a memory's text, category, importance or metadata (its id stays).",
        resident="always",
    ),
    "hot": _at(
        "hot",
        "hot",
        "Show or edit hot memory (always in context; rendered as MEMORY.md).",
        resident="always",
    ),
    "tree": _at("tree", "tree", "Show or edit the category tree index.", resident="always"),
    "consolidate": _at(
        "maintenance",
        "consolidate",
        "Run memory maintenance: quick (hourly), daily, monthly or full (with a report).",
        resident="always",
    ),
    "metrics": _at(
        "maintenance",
        "metrics",
        "Show memory metrics per day: retrievals, evictions, sizes, tokens saved.",
        resident="always",
    ),
    "import": _at(
        "interchange",
        "import_",
        "Import the original JSON files, an exported folder's edits, or another tool's memory "
        "(`--from`); importing twice adds nothing.",
        resident="always",
    ),
    "export": _at(
        "interchange",
        "export",
        "Export the agent's whole memory as markdown, JSON, a folder of markdown files, or in "
        "another tool's format.",
        resident="always",
    ),
    # the write path
    "distill": _at(
        "write",
        "distill_cmd",
        "Distill a conversation (text or OpenClaw/JSONL transcript) into facts and a summary.",
        resident="always",
    ),
    "extract-metadata": _at(
        "write",
        "extract_metadata",
        "List the URLs, shell commands and file paths a file mentions.",
        resident="always",
    ),
    "search-url": _at(
        "write",
        "search_url",
        "Find memories by a fragment of one of their URLs (case-insensitive).",
        resident="always",
    ),
    "urls": _at(
        "write", "urls", "Every stored URL, with the memories that hold it.", resident="always"
    ),
    "validate": _at(
        "write",
        "validate",
        "Check daily notes for missing URLs, commands and next steps (exit 1 if any warning).",
        resident="always",
    ),
    "ingest-daily": _at(
        "write",
        "ingest_daily",
        "Ingest daily notes (memory/YYYY-MM-DD.md; idempotent) and MEMORY.md hand edits.",
        resident="always",
    ),
    "conversation-end": _at(
        "write",
        "conversation_end",
        "After a conversation: distill, store, update hot, consolidate, queue the sync push, "
        "act on the [[pin:…]]-style tags and run session hygiene (promotion, demotion).",
        resident="always",
    ),
    "watch": _at(
        "watch",
        "watch",
        "Ingest new or edited daily notes and MEMORY.md edits as they happen (Ctrl-C stops).",
    ),
    # episodes and the knowledge graph
    "episodes": _at(
        "episodes",
        "episodes_group",
        "Episodic memory: one summary per conversation (list, show, search, export, dream).",
        resident="always",
    ),
    "graph": _at(
        "graph",
        "graph_group",
        "The knowledge graph: entities, relations with time spans, search, merge.",
        resident="always",
    ),
    # agent integration
    "mcp": _at(
        "mcp",
        "mcp_cmd",
        "Run the MCP server on stdio (for Claude Desktop, OpenClaw or any MCP client).",
    ),
    "context": _at(
        "agent",
        "context_cmd",
        "Print the block to put in the prompt: hot memory, the tree index (under 1,500 tokens "
        "together) and the memories relevant to the query, all within the budget.",
        resident="always",
    ),
    "recall": _at(
        "agent",
        "recall",
        "Recall memories within a token budget (the CLI twin of MCP memory_recall).",
        resident="always",
    ),
    "pin": _at(
        "agent",
        "pin",
        "Pin a memory or hot lesson (the [[pin:REF]] tag): never evicted, never demoted.",
        resident="always",
    ),
    "unpin": _at("agent", "unpin", "Remove a pin.", resident="always"),
    "promote": _at(
        "agent",
        "promote",
        "Promote a memory into hot memory now (the [[promote:REF]] tag).",
        resident="always",
    ),
    "demote": _at(
        "agent", "demote", "Take a lesson out of hot memory (it stays in warm).", resident="always"
    ),
    "forget": _at(
        "agent",
        "forget",
        "Forget (the [[forget:REF]] / [[forget keyword:WORD]] tags): a hot entry leaves hot "
        "memory (kept in warm), any other memory is archived (`tiermem unforget` brings it "
        "back).",
        resident="always",
    ),
    "unforget": _at(
        "agent",
        "unforget",
        "Restore a forgotten (archived) memory (the [[restore:REF]] tag).",
        resident="always",
    ),
    "health": _at(
        "agent",
        "health",
        "The session-hygiene report (the [[memory_health]] tag).",
        resident="always",
    ),
    "link": _at(
        "links",
        "link",
        "Link two memories (related_to): `recall --include-context` returns each with the other.",
        resident="always",
    ),
    "working": _at(
        "working",
        "working",
        "Show, set or clear the working memory of a session (a JSON object, size-limited).",
        resident="always",
    ),
    "skills": _at(
        "skills",
        "skills",
        "Skills noticed in repeated commands and tool calls: list, show, accept, reject, export.",
        resident="always",
    ),
    "audit": _at(
        "agent",
        "audit_cmd",
        "Token audit: tokens per source, near-duplicates, recommendations with savings.",
        resident="always",
    ),
    "index-status": _at(
        "agent",
        "index_status",
        "Memory statistics: files, structured store, always-loaded tokens, on-demand domains.",
        resident="always",
    ),
    # sync
    "sync": _at(
        "sync",
        "sync_group",
        "End-to-end encrypted sync of the critical state (hot + tree) with Turso or any libSQL "
        "server.",
        resident="unless-terminal",
    ),
    "daemon": _at(
        "daemon",
        "daemon_cmd",
        "Sync in the background until SIGTERM: push local changes, pull other devices'.",
    ),
    "restore": _at(
        "restore",
        "restore_cmd",
        "Restore an agent from Turso into an empty home: critical state first, then every memory.",
        resident="unless-terminal",
    ),
    # operations
    "service": _at(
        "service",
        "service_group",
        "Run the sync daemon and the consolidation schedule in the background.",
    ),
    "resident": _at(
        "resident",
        "resident_group",
        "Keep a process with tiermem loaded, so that commands start at once.",
    ),
    "logs": _at(
        "logs",
        "logs",
        "Show the end of the log written by the daemon, sync and consolidation.",
        resident="always",
    ),
    "agents": _at(
        "agents",
        "agents_group",
        "List, rename or delete the agents of the memory home.",
        resident="always",
    ),
    "spaces": _at(
        "spaces",
        "spaces_group",
        "List, create, include, exclude or share memory spaces; invite members; undo their writes.",
        resident="unless-terminal",
    ),
    "doctor": _at(
        "doctor",
        "doctor",
        "Check the memory home, its database, config, secrets and sync (exit 1 on any FAIL).",
        resident="always",
    ),
    "demo": _at(
        "demo",
        "demo",
        "Create a demo agent with five months of memories, so the TUI has something to show.",
    ),
    "completion": _at(
        "completion",
        "completion_group",
        "Tab completion for bash, zsh and fish: show the script or install it.",
        resident="always",
    ),
    # the terminal UI
    "tui": _at(
        "tui",
        "tui",
        "Open the terminal UI: browse and curate the tiers, the tree, metrics and sync.",
    ),
    "serve": _at(
        "serve",
        "serve",
        "Serve the terminal UI to a web browser (loopback only unless --lan).",
    ),
}

SYNC: dict[str, Lazy] = {
    "init": _sub(
        "sync",
        "sync_init",
        "Set up sync: keys, remote tables, this device; show the recovery key once.",
    ),
    "push": _sub(
        "sync_transfer",
        "sync_push",
        "Push what changed: critical state and changed memories (one request per batch).",
    ),
    "pull": _sub(
        "sync_transfer",
        "sync_pull",
        "Fetch and apply what other devices pushed since the last pull.",
    ),
    "now": _sub(
        "sync_transfer",
        "sync_now",
        "Pull, then push: bring this device and the server up to date both ways.",
    ),
    "log": _sub(
        "sync_status",
        "sync_log",
        "Recent pushes, pulls and errors of this device, newest first (no network).",
    ),
    "status": _sub(
        "sync_status",
        "sync_status",
        "Show sync settings, the outbox and the last push or error (no network).",
    ),
    "local-server": _sub(
        "sync_local",
        "local_server_cmd",
        "Run a libSQL server with auth on this machine, to try sync without Turso (Ctrl-C stops).",
        resident="never",
    ),
    "set-token": _sub(
        "sync",
        "sync_set_token",
        "Replace this device's server token (after removing a device, or when it expires).",
    ),
    "devices": _sub(
        "devices",
        "devices_cmd",
        "List the devices of this agent's vault (and refresh this one's entry).",
    ),
    "add-device": _sub(
        "devices",
        "add_device_cmd",
        "Join this (empty) home to the agent's existing vault as a new device.",
    ),
    "approve-device": _sub(
        "devices",
        "approve_device_cmd",
        "Approve a new device's pairing request after comparing the words on both screens.",
    ),
    "remove-device": _sub(
        "devices",
        "remove_device_cmd",
        "Revoke a lost device and rotate the vault key for future data.",
    ),
    "rename-device": _sub(
        "devices",
        "rename_cmd",
        "Name this device in the device list (sealed: the server never reads it).",
    ),
    "rotate-key": _sub(
        "devices",
        "rotate_key_cmd",
        "Start a new key epoch without removing a device (e.g. on suspected compromise).",
    ),
    "check": _sub(
        "restore",
        "sync_check",
        "Verify the server's copy: manifests, versions, key wraps (and with --read-data, every "
        "record).",
    ),
    "prune": _sub(
        "restore",
        "sync_prune",
        "Delete old remote versions (beyond the newest N of a record and older than D days; never "
        "the newest) and compact the manifests into a checkpoint.",
    ),
    "conflicts": _sub(
        "conflicts",
        "conflicts_cmd",
        "List values that lost a merge between devices (newest first), by what they are about.",
    ),
    "resolve": _sub(
        "conflicts",
        "resolve_cmd",
        "Close a conflict, keeping the merged value or bringing the lost one back.",
    ),
}

GROUPS: dict[str, dict[str, Lazy]] = {"sync": SYNC}
"""Groups whose subcommands declare their own hand-over."""
