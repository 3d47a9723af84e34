"""tiermem sync: end-to-end encrypted sync to Turso."""
