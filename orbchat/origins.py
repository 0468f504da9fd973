"""Which pages may open a websocket to this site: its own origin, or one the operator trusts.

A browser opens a websocket from any page with the site's cookies, and the Origin header is the
only word on which page did it. Comparing host names alone would let a page on the same host at
another port (another local app, a development server) act as the signed-in person, so the
Origin must equal the request's own origin, scheme and port included, or be listed in
CSRF_TRUSTED_ORIGINS (the same list Django's form check trusts, wildcards included). The Host
must be one of ALLOWED_HOSTS either way. A socket without an Origin is refused: browsers always
send one.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

log = logging.getLogger(__name__)

DEFAULT_PORTS = {"http": 80, "https": 443}


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin1")
    return None


def _is_secure(scope: dict) -> bool:
    """Tell whether the socket came over TLS, trusting a proxy's header as Django's HTTP side does."""
    proxy = settings.SECURE_PROXY_SSL_HEADER
    if proxy:
        header, secure_value = proxy
        value = _header(scope, header.removeprefix("HTTP_").replace("_", "-").lower().encode())
        if value is not None:
            return value.split(",", 1)[0].strip() == secure_value
    return scope.get("scheme") == "wss"


def _host(scope: dict) -> str | None:
    if settings.USE_X_FORWARDED_HOST:
        forwarded = _header(scope, b"x-forwarded-host")
        if forwarded:
            return forwarded.split(",", 1)[0].strip()
    return _header(scope, b"host")


def _allowed_hosts() -> list[str]:
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]  # what Django's HTTP side allows then
    return settings.ALLOWED_HOSTS


def normal(origin: str) -> str | None:
    """Return `scheme://host[:port]` in lower case, without the scheme's default port; None when
    `origin` is not an http(s) origin (a path, user info or a "null" origin are not)."""
    try:
        parts = urlsplit(origin.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.username or parts.password:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    if port is not None and port != DEFAULT_PORTS[parts.scheme]:
        host = f"{host}:{port}"
    return f"{parts.scheme}://{host}"


def _trusted(origin: str) -> bool:
    """Tell whether `origin` (already normal) is one of CSRF_TRUSTED_ORIGINS."""
    scheme, _, netloc = origin.partition("://")
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        if "*" in entry:
            parts = urlsplit(entry.lower())
            if parts.scheme == scheme and is_same_domain(netloc, parts.netloc.lstrip("*")):
                return True
        elif normal(entry) == origin:
            return True
    return False


def refusal(scope: dict) -> str:
    """Return why this websocket may not open, or "" when it may."""
    host = _host(scope)
    domain, _ = split_domain_port(host or "")
    if not domain or not validate_host(domain, _allowed_hosts()):
        return f"the host {host!r} is not in ALLOWED_HOSTS"
    origin = _header(scope, b"origin")
    if origin is None:
        return "no Origin header"
    given = normal(origin)
    if given is None:
        return f"the Origin {origin!r} is not an http(s) origin"
    own = normal(f"{'https' if _is_secure(scope) else 'http'}://{host}")
    if given == own or _trusted(given):
        return ""
    return f"the Origin {origin!r} is neither this site ({own}) nor in CSRF_TRUSTED_ORIGINS"


class SameOriginValidator:
    """ASGI middleware: refuse a websocket whose Origin is not this site's own or a trusted one."""

    def __init__(self, application) -> None:
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket":
            reason = refusal(scope)
            if reason:
                log.warning("refused a websocket to %s: %s", scope.get("path"), reason)
                return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
