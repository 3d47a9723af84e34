#!/usr/bin/env bash
# Fresh machine → working tiermem in one command: a venv in .venv, the package installed,
# and a short first session in a throwaway demo home (your real memory home is not touched).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check .
demo=$(mktemp -d "${TMPDIR:-/tmp}/tiermem-demo.XXXXXX")
tm() { echo "\$ tiermem $*"; .venv/bin/tiermem --home "$demo" "$@"; echo; }
tm hot --update identity '{"agent_name": "Claw", "owner_name": "Sam"}'
tm hot --add-lesson "Always test on testnet before mainnet" --importance 0.9 --category blockchain
tm store --text "Hackathon deadline is Feb 15 for the BSC integration" \
  --category projects/evoclaw/bsc --importance 0.9 --url https://www.bnbchain.org
tm store --text "Owner prefers short, direct answers" --category owner/preferences --importance 0.7
tm tree --add projects/evoclaw "EvoClaw agent framework"
tm retrieve "when is the hackathon deadline"
tm consolidate --mode full
tm tree
tm metrics
tm demo                         # a second agent with five months of memories, for the TUI
tm doctor --offline
echo "Demo home: $demo    Installed: .venv/bin/tiermem"
echo "Look around: .venv/bin/tiermem --home $demo --agent-id demo"
bin="$PWD/.venv/bin"
if [ "$(command -v tiermem 2>/dev/null)" = "$bin/tiermem" ]; then
  echo "tiermem is on your PATH: run tiermem --help"
else
  echo "To run tiermem by name, paste this line (or install it as a tool: pipx install .):"
  echo "  export PATH=\"$bin:\$PATH\""
fi
