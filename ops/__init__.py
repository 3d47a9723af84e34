"""Operations around the memory engine: health checks, background services, the demo home."""

import tiermem.sync  # noqa: F401  (first, for its lighter httpx import)
