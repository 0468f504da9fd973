"""Slow down password guessing: failed sign-ins counted per account and per client address.

After `LOGIN_FAILURES_BEFORE_DELAY` failures for one username (or
`LOGIN_ADDRESS_FAILURES_BEFORE_DELAY` from one address, whatever usernames it tries), every
further failure locks that account (or address) out for a delay that doubles each time, up to
`LOGIN_MAX_DELAY_SECONDS`. While locked, even the right password is refused, so guessing gains
nothing from speed. A successful sign-in clears the account's count; the address keeps its own, so
signing in to one account does not buy more guesses at another.

The counts live in Redis, shared by every web process, and are forgotten a day after the last
failure.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import math
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest
from redis import RedisError

from orbchat import redis

log = logging.getLogger(__name__)

FORGET_AFTER = 24 * 60 * 60  # seconds a count outlives its last failure
TIMEOUT = 2  # seconds Redis may take to answer before sign-in goes on unthrottled


def delay_seconds(failures: int, *, free: int, cap: int) -> int:
    """Seconds locked out after `failures` failures in a row: none for the first `free - 1`,
    then 1, 2, 4, 8… up to `cap`."""
    if failures < free:
        return 0
    return min(cap, 2 ** min(failures - free, 32))


def address_key(address: str) -> str:
    """The address a count belongs to: an IPv4 address, or the /64 network of an IPv6 one (a
    single machine is usually handed a whole /64)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address or "unknown"
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ipaddress.ip_network(f"{ip}/64", strict=False))


def wait_message(seconds: int, *, scope: str) -> str:
    """The refusal shown while locked out, e.g. "… for this account. Try again in 32 seconds."."""
    unit = "second" if seconds == 1 else "seconds"
    if seconds >= 120:
        seconds, unit = math.ceil(seconds / 60), "minutes"
    where = "for this account" if scope == "account" else "from this address"
    return f"Too many failed sign-ins {where}. Try again in {seconds} {unit}."


@dataclass(frozen=True)
class Attempt:
    """One sign-in attempt: the username typed and the address it came from."""

    username: str
    address: str

    @classmethod
    def from_request(cls, request: HttpRequest) -> Attempt:
        return cls(username=request.POST.get("username", ""), address=request.META.get("REMOTE_ADDR", ""))

    def scopes(self) -> list[tuple[str, str, int]]:
        """(scope name, Redis key stem, free failures) for the account and for the address."""
        account = hashlib.sha256(self.username.strip().casefold().encode()).hexdigest()
        address = address_key(self.address)
        return [
            ("account", redis.login_key("account", account), settings.LOGIN_FAILURES_BEFORE_DELAY),
            ("address", redis.login_key("address", address), settings.LOGIN_ADDRESS_FAILURES_BEFORE_DELAY),
        ]


def refusal(attempt: Attempt) -> tuple[str, int] | None:
    """The message and the seconds left when the account or the address is locked out, else None."""
    try:
        client = redis.sync_client(timeout=TIMEOUT)
        waits = [(scope, client.pttl(f"{stem}:locked")) for scope, stem, _ in attempt.scopes()]
    except RedisError:
        log.warning("Sign-in throttling is off: Redis cannot be reached.", exc_info=True)
        return None
    locked = [(scope, math.ceil(ms / 1000)) for scope, ms in waits if ms > 0]
    if not locked:
        return None
    scope, seconds = max(locked, key=lambda item: item[1])
    return wait_message(seconds, scope=scope), seconds


def failure_record(attempt: Attempt) -> None:
    """Count a failed sign-in, and lock the account or address out once it has failed too often."""
    try:
        client = redis.sync_client(timeout=TIMEOUT)
        for _, stem, free in attempt.scopes():
            failures = client.incr(f"{stem}:failures")
            client.expire(f"{stem}:failures", FORGET_AFTER)
            delay = delay_seconds(failures, free=free, cap=settings.LOGIN_MAX_DELAY_SECONDS)
            if delay:
                client.set(f"{stem}:locked", "1", ex=delay)
    except RedisError:
        log.warning("Sign-in throttling is off: Redis cannot be reached.", exc_info=True)


def success_record(attempt: Attempt) -> None:
    """Clear the account's count after a successful sign-in (the address keeps its own)."""
    _, stem, _ = attempt.scopes()[0]
    try:
        redis.sync_client(timeout=TIMEOUT).delete(f"{stem}:failures", f"{stem}:locked")
    except RedisError:
        log.warning("Sign-in throttling is off: Redis cannot be reached.", exc_info=True)
