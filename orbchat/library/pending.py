"""Uploads held while their owner decides: an import that would duplicate something waits here.

Each held upload is a file under the data directory, in a folder of its owner's, named by a
random token; a person can only ever reach their own. What is held longer than HOLD_FOR is
removed the next time anyone holds an upload.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

HOLD_FOR = 24 * 3600  # seconds
_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{20,64}$")


@dataclass(frozen=True)
class Held:
    token: str
    filename: str
    content: bytes
    extra: dict  # what else the import needs (the chosen character, memory on or off)


def _root() -> Path:
    return Path(settings.DATA_DIR) / "pending-imports"


def _folder(user) -> Path:
    return _root() / str(int(user.pk))


def _sweep() -> None:
    cutoff = time.time() - HOLD_FOR
    for path in _root().glob("*/*"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
        except FileNotFoundError:
            pass


def hold(*, user, filename: str, content: bytes, extra: dict | None = None) -> str:
    """Keep an upload for `user`; return the token that gives it back."""
    _sweep()
    folder = _folder(user)
    folder.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    (folder / f"{token}.json").write_text(json.dumps({"filename": filename, "extra": extra or {}}))
    (folder / f"{token}.bin").write_bytes(content)
    return token


def get(*, user, token: str) -> Held | None:
    """The upload `user` holds under `token`, or None (unknown, expired, or someone else's)."""
    if not _TOKEN_RE.match(token or ""):
        return None
    folder = _folder(user)
    try:
        meta = json.loads((folder / f"{token}.json").read_text())
        content = (folder / f"{token}.bin").read_bytes()
    except (FileNotFoundError, ValueError):
        return None
    return Held(token=token, filename=meta["filename"], content=content, extra=meta.get("extra") or {})


def take(*, user, token: str) -> Held | None:
    """The upload `user` holds under `token`, forgotten as it is handed over: an answer sent twice
    (a double click, two tabs) finds it only once."""
    held = get(user=user, token=token)
    if held is not None:
        release(user=user, token=token)
    return held


def release(*, user, token: str) -> None:
    """Forget a held upload."""
    if not _TOKEN_RE.match(token or ""):
        return
    for suffix in (".json", ".bin"):
        (_folder(user) / f"{token}{suffix}").unlink(missing_ok=True)
