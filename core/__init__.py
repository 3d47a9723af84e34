"""tiermem core: the memory model, store, retrieval and consolidation (no UI, no network)."""
