#!/bin/sh
# After each conversation: distill and store it, act on its tags, run session hygiene; with sync
# set up, the push starts in the background (the daemon, else a one-shot pusher) and this returns.
# Usage: after-conversation.sh TRANSCRIPT|- [SESSION_ID]
set -eu
session="${2:-${TIERMEM_SESSION:-}}"
if [ -n "$session" ]; then
    exec tiermem conversation-end "${1:--}" --session "$session"
fi
exec tiermem conversation-end "${1:--}"
