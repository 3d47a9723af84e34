"""The rows the server returns, checked: a malformed row is damage, not a crash; and the page
size that fits the server's response cap."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tiermem.sync import crypto
from tiermem.sync.vault.hrana import SqlError

__all__ = ["RemoteRow", "fit_page", "remote_row", "server_blob", "server_int", "server_str"]


@dataclass(frozen=True, slots=True)
class RemoteRow:
    """One row of a pull page."""

    seq: int
    record_id: bytes
    version: str
    epoch: int
    device_id: bytes
    envelope: bytes


_T = TypeVar("_T")


def fit_page(fetch: Callable[[int], _T], limit: int) -> tuple[_T, int]:
    """`fetch(limit)`, halving `limit` while the server refuses the answer as too large.

    sqld and Turso cap the size of one response, and sealed memories are padded to at least
    8 KiB, so a page of a thousand rows can exceed the cap. Returns the result and the limit
    that fitted: callers keep it for the next pages and compare a page's length with it."""
    while True:
        try:
            return fetch(limit), limit
        except SqlError as exc:
            if exc.code != "RESPONSE_TOO_LARGE" or limit == 1:
                raise
            limit //= 2


def remote_row(row: tuple[object, ...] | list[object]) -> RemoteRow:
    """A `store.records_after` row, type-checked (a malformed row is damage, not a crash)."""
    seq, rid, version, epoch, device, envelope = row
    if not (
        isinstance(seq, int)
        and isinstance(rid, bytes)
        and isinstance(version, str)
        and isinstance(epoch, int)
        and isinstance(device, bytes)
        and isinstance(envelope, bytes)
    ):
        raise crypto.TamperedData("the server returned a malformed record row")
    return RemoteRow(seq, rid, version, epoch, device, envelope)


def server_int(value: object) -> int:
    """A column the server returned, checked: a malformed row is damage, not a crash."""
    if not isinstance(value, int):
        raise crypto.TamperedData("the server returned a malformed row")
    return value


def server_blob(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise crypto.TamperedData("the server returned a malformed row")
    return value


def server_str(value: object) -> str:
    if not isinstance(value, str):
        raise crypto.TamperedData("the server returned a malformed row")
    return value
