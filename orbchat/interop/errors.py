"""The error every interop codec raises, and the input checks they share."""

from __future__ import annotations

import json
from typing import Any

MAX_BYTES = 20 * 1024 * 1024
# Deepest nesting of arrays and objects read from a file. SillyTavern's files stay within a
# dozen levels; copying or saving a structure nested hundreds deep exhausts Python's stack.
MAX_DEPTH = 100


class InteropError(ValueError):
    """A file could not be read or written; the message says why in plain words."""


def describe_size(size: int) -> str:
    """Return a byte count as people say it ("20 MB", "512 KB", "100 bytes")."""
    if size >= 1024 * 1024 and size % (1024 * 1024) == 0:
        return f"{size // (1024 * 1024)} MB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size // 1024} KB"
    return f"{size} bytes"


def check_size(data: bytes | str, max_bytes: int) -> None:
    """Refuse input larger than max_bytes."""
    size = len(data) if isinstance(data, bytes | bytearray) else len(data.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InteropError(f"the file is larger than {describe_size(max_bytes)}")


def too_deep(obj: Any, limit: int = MAX_DEPTH) -> bool:
    """Tell whether arrays and objects nest more than `limit` levels deep (walked without recursion)."""
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        elif not isinstance(value, list):
            continue
        if depth > limit:
            return True
        stack.extend((item, depth + 1) for item in value if isinstance(item, dict | list))
    return False


def load_json(data: bytes | str | dict, what: str, *, max_bytes: int = MAX_BYTES) -> Any:
    """Decode JSON text (or pass a dict through); `what` names the file in messages ("the card")."""
    if isinstance(data, dict):
        return data
    check_size(data, max_bytes)
    if isinstance(data, bytes | bytearray):
        try:
            data = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InteropError(f"{what} is not UTF-8 text") from exc
    elif not isinstance(data, str):
        raise InteropError(f"{what} is not JSON text")
    data = data.removeprefix("\ufeff")
    try:
        obj = json.loads(data)
    except json.JSONDecodeError as exc:
        raise InteropError(f"{what}'s JSON is invalid: {exc.msg} at line {exc.lineno}") from exc
    except RecursionError as exc:
        raise InteropError(f"{what}'s JSON is nested too deeply") from exc
    if too_deep(obj):
        raise InteropError(f"{what}'s JSON is nested too deeply (more than {MAX_DEPTH} levels)")
    return obj
