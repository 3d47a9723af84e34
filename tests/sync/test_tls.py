"""An https:// sync server must prove its certificate before the token is sent: a server on
this machine whose self-signed certificate no CA vouches for gets a refused handshake and
never a request, from every client of a process (they share one CA store, loaded once).
(Plain http:// skips loading the CA store; this guards the other side.)"""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tiermem.sync.vault.hrana import HranaClient, TransportFailure
from tiermem.sync.vault.transport import tls_context

TOKEN = "tls-test-token-9f3e1c"


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key, and that key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


class TlsServer:
    """Accepts connections on loopback with `cert`, records what each sent after the
    handshake, and answers an empty Hrana pipeline."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received = b""
        self.handshakes = 0
        self.failures: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            with raw:
                raw.settimeout(5)
                try:
                    conn = self.context.wrap_socket(raw, server_side=True)
                except (ssl.SSLError, OSError) as exc:
                    self.failures.append(type(exc).__name__)
                    continue
                self.handshakes += 1
                with conn:
                    self.received += conn.recv(65536)
                    body = b'{"baton":null,"base_url":null,"results":[]}'
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode()
                        + body
                    )

    def close(self) -> None:
        self.listener.close()
        self.thread.join(5)


def test_an_untrusted_certificate_refuses_the_connection_before_the_token(
    tmp_path: Path,
) -> None:
    server = TlsServer(*self_signed(tmp_path))
    try:
        with (
            HranaClient(f"https://127.0.0.1:{server.port}", TOKEN) as client,
            pytest.raises(TransportFailure) as info,
        ):
            client.execute("SELECT 1")
    finally:
        server.close()
    assert server.failures, "the client never attempted a TLS handshake"
    assert server.handshakes == 0 and server.received == b""
    assert TOKEN not in str(info.value)


def test_every_client_of_a_process_checks_against_one_ca_store_loaded_once(
    tmp_path: Path,
) -> None:
    tls_context.cache_clear()
    server = TlsServer(*self_signed(tmp_path))
    try:
        for _ in range(2):
            with (
                HranaClient(f"https://127.0.0.1:{server.port}", TOKEN) as client,
                pytest.raises(TransportFailure),
            ):
                client.execute("SELECT 1")
    finally:
        server.close()
    assert len(server.failures) == 2 and server.handshakes == 0 and server.received == b""
    assert tls_context.cache_info().misses == 1
