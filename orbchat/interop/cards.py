"""SillyTavern character cards (V1, V2, V3; JSON or PNG) to and from OrbChat's normalized card.

A normalized card has exactly the keys in CARD_KEYS. `extra` keeps what OrbChat does not use so an
export gives it back: {"spec": "v1" | "v2" | "v3", "data": {...}, "top": {...}}.
"""

from __future__ import annotations

import base64
import binascii
import copy
import io
import json
import math
import re
from typing import Any

from PIL import Image, ImageOps, UnidentifiedImageError

from orbchat.interop import png
from orbchat.interop.errors import MAX_BYTES, InteropError, check_size, load_json

TEXT_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "creator",
    "character_version",
)
LIST_FIELDS = ("alternate_greetings", "tags")
CARD_KEYS = (
    *TEXT_FIELDS,
    *LIST_FIELDS,
    "talkativeness",
    "extensions",
    "character_book",
    "extra",
)
# The order SillyTavern writes a card's text fields in, before tags, creator and version.
SPEC_ORDER = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
)
DATA_FIELDS = frozenset({*TEXT_FIELDS, *LIST_FIELDS, "extensions", "character_book"})
# The V1 fields SillyTavern mirrors at the top of V2/V3 cards and writes from the card on export.
# Its own bookkeeping there (`avatar`, `chat`, `create_date`) is kept with the other top fields.
V1_MIRROR = frozenset(
    {
        "name",
        "description",
        "personality",
        "scenario",
        "first_mes",
        "mes_example",
        "creatorcomment",
        "talkativeness",
        "fav",
        "tags",
    }
)
# data field -> the top-level V1 field read when the data field is missing or empty.
V1_FALLBACK = {
    "name": "name",
    "description": "description",
    "personality": "personality",
    "scenario": "scenario",
    "first_mes": "first_mes",
    "mes_example": "mes_example",
    "creator_notes": "creatorcomment",
}
# The Pygmalion/TavernAI JSON that SillyTavern still imports.
PYGMALION = {
    "name": "char_name",
    "description": "char_persona",
    "scenario": "world_scenario",
    "first_mes": "char_greeting",
    "mes_example": "example_dialogue",
}
SPECS = {"chara_card_v2": "v2", "chara_card_v3": "v3"}
DEFAULT_TALKATIVENESS = 0.5
PLACEHOLDER_SIZE = (400, 600)
PLACEHOLDER_COLOR = (74, 78, 105)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return ""


def _strings(value: Any, *, split_commas: bool = False) -> list[str]:
    if isinstance(value, str):
        if split_commas:
            return [part.strip() for part in value.split(",") if part.strip()]
        return [value] if value.strip() else []
    if not isinstance(value, list):
        return []
    scalars = (item for item in value if isinstance(item, str | int | float) and not isinstance(item, bool))
    return [_text(item) for item in scalars]


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _talkativeness(value: Any) -> float:
    if isinstance(value, bool) or value is None:
        return DEFAULT_TALKATIVENESS
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        return DEFAULT_TALKATIVENESS
    if not math.isfinite(number):
        return DEFAULT_TALKATIVENESS
    return min(1.0, max(0.0, number))


def _js_number(value: float) -> str:
    """Return the number as JavaScript's String() writes it ("0.5", "1")."""
    return str(int(value)) if value.is_integer() else repr(value)


def parse_card_json(data: bytes | str | dict, *, max_bytes: int = MAX_BYTES) -> dict:
    """Return the normalized card of a V1, V2 or V3 card given as JSON text or a decoded object."""
    obj = load_json(data, "the card", max_bytes=max_bytes)
    if not isinstance(obj, dict):
        raise InteropError("the card's JSON is not an object")
    obj = copy.deepcopy(obj)
    spec = obj.get("spec")
    if spec in SPECS:
        version = SPECS[spec]
    elif spec is None or spec == "":
        inner = obj.get("data")
        version = "v2" if isinstance(inner, dict) and inner.get("name") else "v1"
    else:
        raise InteropError(f"unsupported card spec {spec!r}")

    if version == "v1":
        fields = obj
        top_known = DATA_FIELDS | V1_MIRROR | set(PYGMALION.values()) | {"spec", "spec_version"}
        data_extra: dict[str, Any] = {}
    else:
        fields = _dict(obj.get("data"))
        top_known = V1_MIRROR | {"spec", "spec_version", "data"}
        data_extra = {key: value for key, value in fields.items() if key not in DATA_FIELDS}
    # SillyTavern writes it into V2 cards too; defaulting it keeps V2 and V3 round trips equal.
    data_extra.setdefault("group_only_greetings", [])

    card: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        value = _text(fields.get(name))
        if not value and name in V1_FALLBACK:
            value = _text(obj.get(V1_FALLBACK[name]))
        if not value and version == "v1" and name in PYGMALION:
            value = _text(obj.get(PYGMALION[name]))
        card[name] = value
    card["alternate_greetings"] = _strings(fields.get("alternate_greetings"))
    tags = _strings(fields.get("tags"), split_commas=True)
    card["tags"] = tags or _strings(obj.get("tags"), split_commas=True)
    extensions = _dict(fields.get("extensions"))
    talkativeness = extensions.pop("talkativeness", None)
    if talkativeness is None:
        talkativeness = obj.get("talkativeness")
    card["talkativeness"] = _talkativeness(talkativeness)
    card["extensions"] = extensions
    book = fields.get("character_book")
    card["character_book"] = book if isinstance(book, dict) else None
    card["extra"] = {
        "spec": version,
        "data": data_extra,
        "top": {key: value for key, value in obj.items() if key not in top_known},
    }
    if not card["name"].strip():
        raise InteropError("the card has no name")
    return card


def _decode_base64(text: str) -> str:
    compact = "".join(text.split()).translate(str.maketrans("-_", "+/"))
    compact += "=" * (-len(compact) % 4)
    try:
        raw = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InteropError("the card's base64 is invalid") from exc
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InteropError("the card's base64 does not hold UTF-8 text") from exc


def parse_card_png(data: bytes, *, max_bytes: int = MAX_BYTES) -> tuple[dict, bytes]:
    """Return (card, avatar PNG) from a PNG card; the avatar has the card chunks removed."""
    check_size(data, max_bytes)
    if not png.is_png(data):
        raise InteropError("not a PNG image")
    chunks = png.read_text_chunks(data)
    encoded = chunks["ccv3"] if "ccv3" in chunks else chunks.get("chara")
    if encoded is None:
        raise InteropError("the PNG has no character card (no 'chara' or 'ccv3' text chunk)")
    card = parse_card_json(_decode_base64(encoded), max_bytes=max_bytes)
    return card, png.write_text_chunks(data, [], drop={"chara", "ccv3"})


def _to_spec(card: dict, spec: str, version: str) -> dict:
    extra = _dict(card.get("extra"))
    talkativeness = _js_number(_talkativeness(card.get("talkativeness")))
    extensions = {"talkativeness": talkativeness}
    for key, value in _dict(card.get("extensions")).items():
        if key != "talkativeness":
            extensions[key] = copy.deepcopy(value)
    data: dict[str, Any] = {name: _text(card.get(name)) for name in SPEC_ORDER}
    data["tags"] = list(_strings(card.get("tags")))
    data["creator"] = _text(card.get("creator"))
    data["character_version"] = _text(card.get("character_version"))
    data["alternate_greetings"] = list(_strings(card.get("alternate_greetings")))
    data["extensions"] = extensions
    if card.get("character_book") is not None:
        data["character_book"] = copy.deepcopy(card["character_book"])
    for key, value in _dict(extra.get("data")).items():
        data.setdefault(key, copy.deepcopy(value))
    out: dict[str, Any] = {
        "name": data["name"],
        "description": data["description"],
        "personality": data["personality"],
        "scenario": data["scenario"],
        "first_mes": data["first_mes"],
        "mes_example": data["mes_example"],
        "creatorcomment": data["creator_notes"],
        "talkativeness": talkativeness,
        "fav": bool(extensions.get("fav", False)),
        "tags": list(data["tags"]),
        "spec": spec,
        "spec_version": version,
        "data": data,
    }
    for key, value in _dict(extra.get("top")).items():
        out.setdefault(key, copy.deepcopy(value))
    return out


def card_to_v2(card: dict) -> dict:
    """Return the card as SillyTavern writes a Character Card V2 (with the V1 mirror fields)."""
    return _to_spec(card, "chara_card_v2", "2.0")


def card_to_v3(card: dict) -> dict:
    """Return the card as SillyTavern writes a Character Card V3 (with the V1 mirror fields)."""
    out = _to_spec(card, "chara_card_v3", "3.0")
    out["data"].setdefault("group_only_greetings", [])
    return out


def export_card_json(card: dict) -> bytes:
    """Return the card as V3 JSON (UTF-8, indented)."""
    return json.dumps(card_to_v3(card), ensure_ascii=False, indent=2).encode("utf-8")


def _placeholder_png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", PLACEHOLDER_SIZE, PLACEHOLDER_COLOR).save(out, format="PNG")
    return out.getvalue()


def _to_png(image_bytes: bytes) -> bytes:
    try:
        image = Image.open(io.BytesIO(image_bytes))  # reads the header only
    except (UnidentifiedImageError, OSError, SyntaxError, Image.DecompressionBombError) as exc:
        raise InteropError("the avatar is not an image that can be read") from exc
    width, height = image.size
    if Image.MAX_IMAGE_PIXELS and width * height > Image.MAX_IMAGE_PIXELS:
        limit = f"{Image.MAX_IMAGE_PIXELS / 1_000_000:g} megapixels"
        raise InteropError(f"the avatar is {width}×{height} pixels; the limit is {limit}")
    try:
        image.load()
    except (OSError, SyntaxError, ValueError) as exc:
        raise InteropError("the avatar is not an image that can be read") from exc
    image = ImageOps.exif_transpose(image)
    if image.mode not in ("1", "L", "LA", "P", "RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.mode else "RGB")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def export_card_png(card: dict, avatar_png: bytes | None = None) -> bytes:
    """Return a PNG card: the avatar (converted, or a placeholder) carrying `chara` (V2) and `ccv3` (V3)."""
    if avatar_png is None:
        image = _placeholder_png()
    elif png.is_png(avatar_png):
        image = bytes(avatar_png)
    else:
        image = _to_png(avatar_png)
    chunks = [("chara", _encode(card_to_v2(card))), ("ccv3", _encode(card_to_v3(card)))]
    return png.write_text_chunks(image, chunks, drop={"chara", "ccv3"})


def _encode(obj: dict) -> str:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def split_examples(mes_example: str) -> list[str]:
    """Return the example dialogue blocks, split on `<START>` (which is dropped)."""
    blocks = re.split(r"<START>", mes_example or "", flags=re.IGNORECASE)
    return [block.strip() for block in blocks if block.strip()]
