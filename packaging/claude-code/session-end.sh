#!/bin/sh
# Claude Code SessionEnd hook: the session that just ended goes through conversation-end
# (distilled, deduplicated, dated by the session; a resumed session adds only what is new).
# Claude Code passes {"session_id", "transcript_path", "cwd", "reason", ...} on standard input.
set -eu
transcript=$(python3 -c 'import json, sys; print(json.load(sys.stdin).get("transcript_path") or "")')
if [ -z "$transcript" ] || [ ! -f "$transcript" ]; then
    exit 0
fi
exec tiermem import --from claude-code "$transcript" >/dev/null
