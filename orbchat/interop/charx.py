"""CHARX character cards: a zip holding `card.json` (Character Card V3) and the card's asset files.

Reading keeps every file of the archive but `card.json` as an asset, under its path in the zip,
so an export writes the same archive back. The card's `data.assets` list says what each file is;
its icon (`type: "icon"`, the one named `main` first) becomes the character's avatar. Asset URIs
are `embeded://path/in/zip` (the spec's spelling; `embedded://` is read too), `ccdefault:` (the
card's own image) or a web address, which is kept and never fetched.
"""

from __future__ import annotations

import io
import json
import posixpath
import zipfile
from dataclasses import dataclass

from orbchat.interop import cards
from orbchat.interop.errors import MAX_BYTES, InteropError, check_size, describe_size

ZIP_MAGIC = b"PK\x03\x04"
EMPTY_ZIP_MAGIC = b"PK\x05\x06"
CARD_PATH = "card.json"
MAX_FILES = 1000
EMBEDDED_PREFIXES = ("embeded://", "embedded://")
AVATAR_PATH = "assets/icon/images/main.png"


@dataclass(frozen=True)
class Asset:
    """One file of a CHARX archive other than card.json."""

    path: str
    content: bytes


def is_zip(data: bytes) -> bool:
    """Tell whether the bytes start like a zip archive (a CHARX file is one)."""
    return bytes(data[:4]) in (ZIP_MAGIC, EMPTY_ZIP_MAGIC)


def embedded_path(uri: object) -> str | None:
    """Return the path in the archive an asset URI points at, or None when it points elsewhere."""
    if not isinstance(uri, str):
        return None
    for prefix in EMBEDDED_PREFIXES:
        if uri.lower().startswith(prefix):
            return uri[len(prefix) :].lstrip("/")
    return None


def _safe_path(name: str) -> str:
    path = posixpath.normpath(name.replace("\\", "/"))
    if name.startswith("/") or path.startswith("../") or path == ".." or ":" in path.split("/")[0]:
        raise InteropError(f"the CHARX holds a file with an unsafe path: {name!r}")
    return path


def _read_members(data: bytes, max_bytes: int) -> dict[str, bytes]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise InteropError(f"the CHARX is not a readable zip archive ({exc})") from exc
    with archive:
        infos = [info for info in archive.infolist() if not info.is_dir()]
        if len(infos) > MAX_FILES:
            raise InteropError(f"the CHARX holds {len(infos)} files; the limit is {MAX_FILES}")
        total = sum(info.file_size for info in infos)
        if total > max_bytes:
            raise InteropError(f"the CHARX unpacks to {total} bytes; the limit is {describe_size(max_bytes)}")
        members: dict[str, bytes] = {}
        for info in infos:
            path = _safe_path(info.filename)
            if info.flag_bits & 0x1:
                raise InteropError(f"the CHARX file {path!r} is encrypted")
            if path in members:
                raise InteropError(f"the CHARX holds {path!r} twice")
            try:
                members[path] = archive.read(info)
            except zipfile.BadZipFile as exc:
                raise InteropError(f"the CHARX file {path!r} is damaged ({exc})") from exc
            except NotImplementedError as exc:
                raise InteropError(f"the CHARX file {path!r} uses a compression OrbChat cannot read") from exc
            except (OSError, EOFError, RuntimeError, ValueError) as exc:
                raise InteropError(f"the CHARX file {path!r} cannot be read ({exc})") from exc
    return members


def parse_charx(data: bytes, *, max_bytes: int = MAX_BYTES) -> tuple[dict, bytes | None, list[Asset]]:
    """Return (card, avatar image or None, assets) from a CHARX archive."""
    check_size(data, max_bytes)
    if not is_zip(data):
        raise InteropError("the CHARX is not a zip archive")
    members = _read_members(bytes(data), max_bytes)
    if CARD_PATH not in members:
        found = ", ".join(sorted(members)[:5]) or "no files"
        raise InteropError(f"the CHARX has no card.json at its top level (it holds {found})")
    raw = members.pop(CARD_PATH)
    try:
        obj = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise InteropError("the CHARX's card.json is not UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        raise InteropError(f"the CHARX's card.json is invalid JSON: {exc.msg} at line {exc.lineno}") from exc
    except RecursionError as exc:
        raise InteropError("the CHARX's card.json is nested too deeply") from exc
    if not isinstance(obj, dict) or not obj.get("spec"):
        raise InteropError("the CHARX's card.json is not a character card (it has no spec field)")
    card = cards.parse_card_json(obj, max_bytes=max_bytes)
    assets = [Asset(path, content) for path, content in members.items()]
    return card, _icon(card, members), assets


def card_assets(card: dict) -> list[dict]:
    """Return the card's V3 `assets` list (the entries that are objects)."""
    listed = cards._dict(card.get("extra")).get("data", {}).get("assets")
    return [asset for asset in listed if isinstance(asset, dict)] if isinstance(listed, list) else []


def icon_path(card: dict) -> str | None:
    """Return the archive path of the card's icon: the one named `main`, else the first."""
    icons = [
        asset
        for asset in card_assets(card)
        if asset.get("type") == "icon" and embedded_path(asset.get("uri"))
    ]
    icons.sort(key=lambda asset: asset.get("name") != "main")
    return embedded_path(icons[0]["uri"]) if icons else None


def _icon(card: dict, members: dict[str, bytes]) -> bytes | None:
    path = icon_path(card)
    return members.get(_safe_path(path)) if path else None


def export_charx(card: dict, *, assets: list[Asset], avatar: bytes | None) -> bytes:
    """Return a CHARX archive: `card.json` (V3), then every asset at its path.

    A card with no icon among its assets gets the avatar as `assets/icon/images/main.png`.
    """
    obj = cards.card_to_v3(card)
    files = {asset.path: asset.content for asset in assets}
    if avatar is not None and not (icon_path(card) and icon_path(card) in files):
        listed = [
            asset
            for asset in obj["data"].get("assets", [])
            if not (isinstance(asset, dict) and asset.get("type") == "icon")
        ]
        icon = {"type": "icon", "uri": f"embeded://{AVATAR_PATH}", "name": "main", "ext": "png"}
        obj["data"]["assets"] = [icon, *listed]
        files[AVATAR_PATH] = avatar
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(CARD_PATH, json.dumps(obj, ensure_ascii=False, indent=2))
        for path, content in files.items():
            archive.writestr(path, content)
    return out.getvalue()
