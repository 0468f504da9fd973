"""The outbound-address policy: which addresses the server may call on a user's behalf.

A connection's API base is an address a user chose. On a machine with one account that user is
the operator, and anything goes (`open`). Once a second account exists (or when the operator
says so) the server is shared, and a user's API base must not turn it into a proxy into its own
network: loopback, private, link-local and other non-public addresses are refused for anyone who
is not an administrator (`public-only`), unless the operator allowed the address in
`OUTBOUND_ALLOW` (a local model server, say). The check runs on the resolved addresses at the
moment of the call, so a name that later resolves somewhere else is checked again.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from orbchat.accounts.models import User

OPEN = "open"
PUBLIC_ONLY = "public-only"
AUTO = "auto"
POLICIES = (AUTO, OPEN, PUBLIC_ONLY)


class OutboundRefused(Exception):
    """The policy refuses this address; the message says why in words a person can act on."""


@dataclass(frozen=True)
class Allowed:
    """One `OUTBOUND_ALLOW` entry: an address or network, and a port (None: any port)."""

    network: ipaddress.IPv4Network | ipaddress.IPv6Network
    port: int | None

    def admits(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> bool:
        return address in self.network and (self.port is None or self.port == port)


def parse_allow(text: str) -> list[Allowed]:
    """Parse `127.0.0.1:5001, 10.0.0.0/8, [::1]:8080, 192.168.1.5` into entries (pure)."""
    entries = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        host, port = item, None
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest.removeprefix(":") or None
        elif item.count(":") == 1:
            host, port = item.split(":")
        try:
            network = ipaddress.ip_network(host, strict=False)
            entries.append(Allowed(network, int(port) if port else None))
        except ValueError as exc:
            raise ValueError(f"OUTBOUND_ALLOW has an entry that is not an address[:port]: {item!r}") from exc
    return entries


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """True for an address on the public internet (pure)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def endpoint(url: str) -> tuple[str, int]:
    """Return the host and port a URL reaches (the scheme's port when none is written)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OutboundRefused(f"The API base must be an http:// or https:// address, not {url!r}.")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise OutboundRefused(f"The API base has an invalid port: {url!r}.") from exc
    return parts.hostname, port


def refusal(host: str, port: int, addresses: list[str], allow: list[Allowed]) -> str:
    """Return why the policy refuses these resolved addresses, or "" when it allows them (pure)."""
    for text in addresses:
        address = ipaddress.ip_address(text.split("%", 1)[0])
        if is_public(address) or any(entry.admits(address, port) for entry in allow):
            continue
        shown = host if host == text else f"{host} ({text})"
        return (
            f"This server does not call private or local addresses for its users: {shown} port {port}. "
            "An administrator can allow it with OUTBOUND_ALLOW."
        )
    return ""


def policy() -> str:
    """Return the policy in force: `open` or `public-only` (`auto` decides by the accounts)."""
    chosen = settings.OUTBOUND_POLICY
    if chosen != AUTO:
        return chosen
    return OPEN if len(User.objects.values_list("pk", flat=True)[:2]) < 2 else PUBLIC_ONLY


def guarded(user) -> bool:
    """True when this user's calls must pass the address check (sync: reads the accounts)."""
    if user.can_manage_users:
        return False
    return policy() == PUBLIC_ONLY


def _addresses(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise OutboundRefused(f"The address {host} could not be resolved: {exc.strerror or exc}.") from exc
    return [info[4][0] for info in infos]


def check(url: str) -> None:
    """Raise OutboundRefused unless every address the URL resolves to is allowed (blocking)."""
    host, port = endpoint(url)
    reason = refusal(host, port, _addresses(host, port), parse_allow(settings.OUTBOUND_ALLOW))
    if reason:
        raise OutboundRefused(reason)


async def acheck(url: str) -> None:
    """`check` for the event loop: the name is resolved off the loop's thread."""
    await asyncio.to_thread(check, url)
