#!/bin/sh
# Consolidation: quick on each heartbeat (every 2-4 hours), daily at night, monthly on the 1st.
# Usage: heartbeat.sh [quick|daily|monthly|full]
set -eu
exec tiermem consolidate --mode "${1:-quick}"
