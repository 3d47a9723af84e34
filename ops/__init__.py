"""Operations around the memory engine: health checks, background services, the demo home."""
