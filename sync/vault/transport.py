"""Where and how a sync client connects: the URL's HTTP base, https unless loopback, CA store."""

from __future__ import annotations

import functools
import ipaddress
import ssl
import time
import urllib.parse
from email.utils import parsedate_to_datetime

from tiermem.core.errors import InsecureTransport, InvalidInput

__all__ = [
    "parse_retry_after",
    "permit_insecure_http",
    "require_secure",
    "tls_context",
    "to_base_url",
    "url_token",
]


def url_token(url: str) -> str | None:
    """The ``authToken`` a database URL carries (Turso's own URLs do), else None."""
    try:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(url.strip()).query)
    except ValueError:
        return None
    values = query.get("authToken") or query.get("authtoken")
    return values[0] if values and values[0] else None


_PERMITTED: set[str] = set()


def permit_insecure_http(url: str) -> None:
    """Accept plain http:// to `url`'s host for the rest of this process (the user passed
    ``--insecure-http`` to a command that hands the URL on to other modules)."""
    _PERMITTED.add(to_base_url(url))


def require_secure(url: str, insecure_http: bool = False) -> str:
    """The base URL of `url`, refused when it is plain http:// to a host other than this
    machine (the bearer token would travel in clear) unless `insecure_http`."""
    base = to_base_url(url)
    parts = urllib.parse.urlsplit(base)
    allowed = insecure_http or base in _PERMITTED
    if parts.scheme == "http" and not allowed and not _loopback(parts.hostname or ""):
        raise InsecureTransport(
            f"refusing plain http:// to {parts.hostname}: the token would travel in clear; "
            "use https:// (or libsql://), or pass --insecure-http to accept the risk"
        )
    return base


def _loopback(host: str) -> bool:
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def to_base_url(url: str) -> str:
    """Map a database URL to the HTTP base: ``libsql://h`` → ``https://h``; http(s) kept.

    ``libsql://h:port?tls=0`` maps to ``http://`` as in the official clients. Query strings are
    otherwise dropped so that a secret in one (``?authToken=``) never reaches a log line.
    """
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise InvalidInput("the database URL is malformed") from None
    scheme = parts.scheme.lower()
    if scheme == "libsql":
        tls_off = urllib.parse.parse_qs(parts.query).get("tls") == ["0"]
        scheme = "http" if tls_off else "https"
    elif scheme not in ("http", "https"):
        shown = scheme or "none"
        raise InvalidInput(
            f"unsupported database URL scheme {shown!r} (expected libsql://, https:// or http://)"
        )
    if not parts.hostname:
        raise InvalidInput("the database URL has no host")
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    return urllib.parse.urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))


@functools.cache
def tls_context() -> ssl.SSLContext:
    """What `verify=True` gives an httpx client that ignores the environment (certifi's CA
    store), loaded once per process: httpx loads it again for every client, about 20 ms each."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date), or None."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)
