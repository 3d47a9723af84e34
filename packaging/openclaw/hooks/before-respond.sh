#!/bin/sh
# Before the agent answers: print the memory block to put in its prompt.
# Usage: before-respond.sh MESSAGE [SESSION_ID]   (budget: $TIERMEM_BUDGET, default 3000)
set -eu
session="${2:-${TIERMEM_SESSION:-}}"
if [ -n "$session" ]; then
    exec tiermem context --query "${1:-}" --budget "${TIERMEM_BUDGET:-3000}" --session "$session"
fi
exec tiermem context --query "${1:-}" --budget "${TIERMEM_BUDGET:-3000}"
