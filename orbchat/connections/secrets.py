"""Encrypt API keys at rest with a key derived from the server's SECRET_KEY."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


class KeyUnreadable(Exception):
    """The stored key was encrypted under another SECRET_KEY; it must be entered again."""


def _fernet() -> Fernet:
    digest = hashlib.sha256(b"orbchat.connections.api-key:" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt(plain: str) -> str:
    return _fernet().encrypt(plain.encode()).decode() if plain else ""


def decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise KeyUnreadable(
            "The saved API key can't be read (the server's secret changed); enter it again."
        ) from exc
