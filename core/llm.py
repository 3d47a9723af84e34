"""A minimal client for OpenAI-compatible chat endpoints (`POST {base_url}/chat/completions`).

It uses the standard library (`urllib.request`), not httpx: `tiermem.core` stays free of network
libraries beyond the stdlib, and one JSON POST with a timeout needs nothing more. The transport
is injectable (`Transport`) for callers that want their own HTTP stack.

Settings come from config.toml `[llm]`, overridden by the environment (`TIERMEM_LLM_BASE_URL`,
`TIERMEM_LLM_MODEL`, `TIERMEM_LLM_API_KEY`). The API key is sent only as a bearer token: it is
kept out of `repr`, and every error message is built without it (and scrubbed besides).
"""

from __future__ import annotations

import ipaddress
import json
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tiermem.core.config import LLMConfig
from tiermem.core.environment import environment
from tiermem.core.errors import LLMError as LLMError

if TYPE_CHECKING:
    import urllib.request as urlrequest

MAX_RESPONSE_BYTES = 4 * 1024 * 1024

Transport = Callable[[str, bytes, dict[str, str], float], bytes]
"""(url, body, headers, timeout seconds) → response body; raises LLMError."""


@dataclass(frozen=True)
class LLMSettings:
    base_url: str = ""
    model: str = ""
    api_key: str = field(default="", repr=False)
    timeout: float = 30.0
    max_input_chars: int = 48000

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)

    def public(self) -> dict[str, Any]:
        """What may be shown: never the key, only whether there is one."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "api_key_set": bool(self.api_key),
            "timeout_seconds": self.timeout,
        }


def settings_from(cfg: LLMConfig, environ: Mapping[str, str] | None = None) -> LLMSettings:
    """`[llm]` with the `TIERMEM_LLM_*` variables of `environ` (default: the process's) on top."""
    env = environment(environ)
    return LLMSettings(
        base_url=(env.llm_base_url or cfg.base_url).strip().rstrip("/"),
        model=(env.llm_model or cfg.model).strip(),
        api_key=(env.llm_api_key or cfg.api_key).strip(),
        timeout=cfg.timeout_seconds,
        max_input_chars=cfg.max_input_chars,
    )


def chat_json(
    settings: LLMSettings,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    *,
    transport: Transport | None = None,
) -> str:
    """The assistant's reply (its `content`) to `messages`, asked to follow `schema`."""
    url = settings.base_url + "/chat/completions"
    body = json.dumps(
        {
            "model": settings.model,
            "messages": messages,
            "temperature": 0,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "distilled", "strict": True, "schema": schema},
            },
        }
    ).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    send = transport or urllib_transport
    try:
        raw = send(url, body, headers, settings.timeout)
    except LLMError as exc:
        message = _scrub(str(exc), settings.api_key)
        _warn("LLM call to %s failed: %s", _origin(url), message)
        raise LLMError(message) from None
    try:
        reply = json.loads(raw)
        content = reply["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        _warn("LLM endpoint %s: the answer is not a chat completion", _origin(url))
        raise LLMError("the LLM endpoint's answer is not an OpenAI chat completion") from None
    if not isinstance(content, str):
        raise LLMError("the LLM's answer has no text content")
    return content


def _warn(message: str, *args: object) -> None:
    import logging  # only a failed call logs

    logging.getLogger(__name__).warning(message, *args)


def urllib_transport(url: str, body: bytes, headers: dict[str, str], timeout: float) -> bytes:
    """POST with the standard library. Loopback endpoints bypass any configured proxy."""
    # the HTTP stack (email, ssl, ...) loads on the first request: `store` starts faster
    import http.client as httpclient
    import urllib.error as urlerror
    import urllib.request as urlrequest

    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or ":?" in _origin(url):
        raise LLMError(f"invalid LLM base URL {_origin(url)!r}: use http(s)://host[:port]/path")
    handlers: list[urlrequest.BaseHandler] = []
    if is_loopback(parts.hostname):
        handlers.append(urlrequest.ProxyHandler({}))
    opener = urlrequest.build_opener(*handlers)
    request = urlrequest.Request(url, data=body, headers=headers, method="POST")
    where = _origin(url)
    try:
        with opener.open(request, timeout=timeout) as response:
            data: bytes = response.read(MAX_RESPONSE_BYTES + 1)
    except urlerror.HTTPError as exc:
        raise LLMError(f"HTTP {exc.code} from the LLM endpoint {where}") from None
    except urlerror.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):  # socket.timeout is TimeoutError
            raise LLMError(f"the LLM endpoint {where} timed out after {timeout:g} s") from None
        text = getattr(reason, "strerror", None) or str(reason)
        raise LLMError(f"cannot reach the LLM endpoint {where}: {text}") from None
    except TimeoutError:
        raise LLMError(f"the LLM endpoint {where} timed out after {timeout:g} s") from None
    except (httpclient.HTTPException, OSError) as exc:
        raise LLMError(
            f"connection to the LLM endpoint {where} failed ({type(exc).__name__})"
        ) from None
    if len(data) > MAX_RESPONSE_BYTES:
        raise LLMError(f"the LLM endpoint {where} answered more than 4 MB")
    return data


def _origin(url: str) -> str:
    """scheme://host:port/path of a URL, without any user:password@ part or query."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ":?"
    return f"{parts.scheme}://{host}{port}{parts.path}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _scrub(message: str, key: str) -> str:
    return message.replace(key, "***") if key else message
