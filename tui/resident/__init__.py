"""A resident process that runs `tiermem` commands without starting Python each time."""
