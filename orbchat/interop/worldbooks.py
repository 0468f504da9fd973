"""SillyTavern World Info JSON and card-embedded character books to and from normalized entries.

A normalized book is {"name", "entries", "extra"}; an entry has exactly the keys in ENTRY_KEYS, with
SillyTavern's defaults filled in, and `extra` keeps every field OrbChat does not use.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from orbchat.interop.errors import MAX_BYTES, InteropError, load_json

MAX_ENTRIES = 50_000
ENTRY_KEYS = (
    "uid",
    "keys",
    "secondary_keys",
    "selective",
    "selective_logic",
    "comment",
    "content",
    "constant",
    "enabled",
    "order",
    "probability",
    "use_probability",
    "position",
    "depth",
    "role",
    "group",
    "group_override",
    "group_weight",
    "use_group_scoring",
    "prevent_recursion",
    "exclude_recursion",
    "delay_until_recursion",
    "scan_depth",
    "case_sensitive",
    "match_whole_words",
    "sticky",
    "cooldown",
    "delay",
    "extra",
)
# Our name -> the World Info JSON name, for every field but `enabled` (stored inverted as `disable`).
WI_NAMES = {
    "uid": "uid",
    "keys": "key",
    "secondary_keys": "keysecondary",
    "selective": "selective",
    "selective_logic": "selectiveLogic",
    "comment": "comment",
    "content": "content",
    "constant": "constant",
    "order": "order",
    "probability": "probability",
    "use_probability": "useProbability",
    "position": "position",
    "depth": "depth",
    "role": "role",
    "group": "group",
    "group_override": "groupOverride",
    "group_weight": "groupWeight",
    "use_group_scoring": "useGroupScoring",
    "prevent_recursion": "preventRecursion",
    "exclude_recursion": "excludeRecursion",
    "delay_until_recursion": "delayUntilRecursion",
    "scan_depth": "scanDepth",
    "case_sensitive": "caseSensitive",
    "match_whole_words": "matchWholeWords",
    "sticky": "sticky",
    "cooldown": "cooldown",
    "delay": "delay",
}
# Our name -> the name inside a character book entry's `extensions`.
BOOK_EXTENSION_NAMES = {
    "position": "position",
    "exclude_recursion": "exclude_recursion",
    "probability": "probability",
    "use_probability": "useProbability",
    "depth": "depth",
    "selective_logic": "selectiveLogic",
    "group": "group",
    "group_override": "group_override",
    "group_weight": "group_weight",
    "prevent_recursion": "prevent_recursion",
    "delay_until_recursion": "delay_until_recursion",
    "scan_depth": "scan_depth",
    "match_whole_words": "match_whole_words",
    "use_group_scoring": "use_group_scoring",
    "case_sensitive": "case_sensitive",
    "role": "role",
    "sticky": "sticky",
    "cooldown": "cooldown",
    "delay": "delay",
}
BOOK_ENTRY_FIELDS = frozenset(
    {
        "id",
        "keys",
        "secondary_keys",
        "comment",
        "content",
        "constant",
        "selective",
        "insertion_order",
        "enabled",
        "position",
        "case_sensitive",
        "extensions",
    }
)
# Extension fields SillyTavern keeps on its World Info entries under camelCase names; mapping them
# lets an entry move between the two formats. Each carries the value SillyTavern writes by default.
BOOK_EXTRA_EXTENSIONS = {
    "display_index": ("displayIndex", None),
    "automation_id": ("automationId", ""),
    "vectorized": ("vectorized", False),
}
BOOK_EXTRA_ENTRY = {"use_regex": True}


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _bool(value: Any, default: bool | None) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
    return default


def _int(value: Any, default: int | None) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else default
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return default
        return int(number) if math.isfinite(number) else default
    return default


def _count(value: Any, default: int | None) -> int | None:
    """Return a whole number that cannot be negative (None stays None when it is the default)."""
    number = _int(value, default)
    return None if number is None else max(0, number)


def _in_range(value: Any, low: int, high: int, default: int) -> int:
    number = _int(value, default)
    return number if number is not None and low <= number <= high else default


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return ""


def _keys(value: Any) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list):
        return []
    scalars = (item for item in value if isinstance(item, str | int | float) and not isinstance(item, bool))
    return [_text(item) for item in scalars]


def _role(values: dict[str, Any]) -> int | None:
    if "role" not in values:
        return 0
    if values["role"] is None:
        return None
    return _in_range(values["role"], 0, 2, 0)


def _normalize(values: dict[str, Any], extra: dict[str, Any]) -> dict:
    """Return an entry from values under our names, coerced, with SillyTavern's defaults when missing."""
    get = values.get
    probability = get("probability")
    return {
        "uid": _count(get("uid"), 0),
        "keys": _keys(get("keys")),
        "secondary_keys": _keys(get("secondary_keys")),
        "selective": _bool(get("selective"), True),
        "selective_logic": _in_range(get("selective_logic"), 0, 3, 0),
        "comment": _text(get("comment")),
        "content": _text(get("content")),
        "constant": _bool(get("constant"), False),
        "enabled": _bool(get("enabled"), True),
        "order": _int(get("order"), 100),
        "probability": 100 if probability is None else min(100, _count(probability, 100)),
        "use_probability": _bool(get("use_probability"), True),
        "position": _in_range(get("position"), 0, 6, 0),
        "depth": _count(get("depth"), 4),
        "role": _role(values),
        "group": _text(get("group")),
        "group_override": _bool(get("group_override"), False),
        "group_weight": _count(get("group_weight"), 100),
        "use_group_scoring": _bool(get("use_group_scoring"), None),
        "prevent_recursion": _bool(get("prevent_recursion"), False),
        "exclude_recursion": _bool(get("exclude_recursion"), False),
        "delay_until_recursion": _count(get("delay_until_recursion"), 0),
        "scan_depth": _count(get("scan_depth"), None),
        "case_sensitive": _bool(get("case_sensitive"), None),
        "match_whole_words": _bool(get("match_whole_words"), None),
        "sticky": _count(get("sticky"), None),
        "cooldown": _count(get("cooldown"), None),
        "delay": _count(get("delay"), None),
        "extra": extra,
    }


def _renormalize(entry: dict) -> dict:
    """Return a (possibly hand-made or partial) normalized entry with every key coerced and filled."""
    values = {key: value for key, value in entry.items() if key in ENTRY_KEYS and key != "extra"}
    return _normalize(values, copy.deepcopy(_dict(entry.get("extra"))))


def _unique_uids(entries: list[dict]) -> list[dict]:
    """Give a later entry that repeats a uid the next free one: uids key the exported file."""
    seen: set[int] = set()
    highest = -1
    for entry in entries:
        if entry["uid"] in seen:
            entry["uid"] = highest + 1
        seen.add(entry["uid"])
        highest = max(highest, entry["uid"])
    return entries


def _items(entries: Any, what: str) -> list[tuple[Any, Any]]:
    if isinstance(entries, dict):
        items = list(entries.items())
    elif isinstance(entries, list):
        items = list(enumerate(entries))
    else:
        raise InteropError(f"{what}'s 'entries' is neither a list nor an object")
    if len(items) > MAX_ENTRIES:
        raise InteropError(f"{what} has {len(items):,} entries; at most {MAX_ENTRIES:,} can be imported")
    return items


def _wi_entry(raw: dict, fallback_uid: int) -> dict:
    values = {ours: raw[theirs] for ours, theirs in WI_NAMES.items() if theirs in raw}
    if _int(values.get("uid"), None) is None or _int(values["uid"], None) < 0:
        values["uid"] = fallback_uid
    if "disable" in raw:
        values["enabled"] = not _bool(raw["disable"], False)
    elif "enabled" in raw:
        values["enabled"] = raw["enabled"]
    # SillyTavern's scan reads a missing `selective` or `useProbability` as false: secondary keys
    # are not checked, the probability is not rolled; and a roll against a missing `probability`
    # always fails. (Its editor writes all three on every entry.)
    values.setdefault("selective", False)
    values.setdefault("use_probability", False)
    if _bool(values["use_probability"], False) and values.get("probability") is None:
        values["probability"] = 0
    known = {*WI_NAMES.values(), "disable", "enabled"}
    extra = {key: value for key, value in raw.items() if key not in known}
    return _normalize(values, extra)


def _looks_like_book(entries: Any) -> bool:
    """Tell whether a list of entries is in the character book shape (`keys`, no `key`)."""
    if not isinstance(entries, list):
        return False
    objects = [entry for entry in entries if isinstance(entry, dict)]
    return bool(objects) and all("keys" in entry and "key" not in entry for entry in objects)


def parse_world_info(data: bytes | str | dict, *, name: str = "", max_bytes: int = MAX_BYTES) -> dict:
    """Return the normalized book of a SillyTavern World Info file (entries as an object or a list)."""
    obj = load_json(data, "the World Info file", max_bytes=max_bytes)
    if not isinstance(obj, dict):
        raise InteropError("not a World Info file: it is not a JSON object")
    if "entries" not in obj:
        raise InteropError("not a World Info file: it has no 'entries'")
    obj = copy.deepcopy(obj)
    if _looks_like_book(obj["entries"]):
        book = parse_character_book(obj)
        return {**book, "name": name or book["name"]}
    entries = []
    for index, (key, raw) in enumerate(_items(obj["entries"], "the World Info file")):
        if not isinstance(raw, dict):
            label = f"'{key}'" if isinstance(key, str) else str(key)
            raise InteropError(f"World Info entry {label} is not an object")
        fallback = _int(key, None) if isinstance(key, str) else None
        entries.append(_wi_entry(raw, fallback if fallback is not None and fallback >= 0 else index))
    extra = {key: value for key, value in obj.items() if key != "entries"}
    file_name = obj.get("name") if isinstance(obj.get("name"), str) else ""
    return {"name": name or file_name, "entries": _unique_uids(entries), "extra": extra}


def _delay_until_recursion(level: int) -> bool | int:
    # SillyTavern 1.12 stores a boolean; later versions also accept a recursion level above 1.
    return level if level > 1 else bool(level)


def export_world_info(book: dict) -> dict:
    """Return the book as a SillyTavern World Info file, every field written, keyed by uid."""
    entries = _unique_uids([_renormalize(entry) for entry in book.get("entries") or []])
    out_entries: dict[str, dict] = {}
    for entry in entries:
        out = {WI_NAMES[ours]: copy.deepcopy(entry[ours]) for ours in WI_NAMES}
        out["disable"] = not entry["enabled"]
        out["delayUntilRecursion"] = _delay_until_recursion(entry["delay_until_recursion"])
        for key, value in entry["extra"].items():
            out.setdefault(key, value)
        out_entries[str(entry["uid"])] = out
    result: dict[str, Any] = {"entries": out_entries}
    for key, value in _dict(book.get("extra")).items():
        result.setdefault(key, copy.deepcopy(value))
    return result


def _book_entry(raw: dict, index: int) -> dict:
    ext = _dict(raw.get("extensions"))
    values: dict[str, Any] = {
        ours: ext[theirs] for ours, theirs in BOOK_EXTENSION_NAMES.items() if theirs in ext
    }
    uid = _int(raw.get("id"), None)
    values["uid"] = uid if uid is not None and uid >= 0 else index
    for ours, theirs in (
        ("keys", "keys"),
        ("secondary_keys", "secondary_keys"),
        ("comment", "comment"),
        ("content", "content"),
        ("constant", "constant"),
        ("order", "insertion_order"),
        ("enabled", "enabled"),
    ):
        if theirs in raw:
            values[ours] = raw[theirs]
    # SillyTavern reads a missing `selective` as false here, unlike in World Info files.
    values["selective"] = _bool(raw.get("selective"), False)
    if values.get("position") is None:
        values["position"] = 0 if raw.get("position") == "before_char" else 1
    if values.get("case_sensitive") is None and "case_sensitive" in raw:
        values["case_sensitive"] = raw["case_sensitive"]

    extra: dict[str, Any] = {}
    for theirs, (ours, default) in BOOK_EXTRA_EXTENSIONS.items():
        if theirs in ext and ext[theirs] != default:
            extra[ours] = ext[theirs]
    for key, default in BOOK_EXTRA_ENTRY.items():
        if key in raw and raw[key] != default:
            extra[key] = raw[key]
    unknown = {
        key: value
        for key, value in ext.items()
        if key not in BOOK_EXTENSION_NAMES.values() and key not in BOOK_EXTRA_EXTENSIONS
    }
    if unknown:
        extra["extensions"] = unknown
    for key, value in raw.items():
        if key not in BOOK_ENTRY_FIELDS and key not in BOOK_EXTRA_ENTRY:
            extra[key] = value
    return _normalize(values, extra)


def parse_character_book(book: dict) -> dict:
    """Return the normalized book of a card's embedded `character_book`."""
    if not isinstance(book, dict):
        raise InteropError("the character book is not an object")
    book = copy.deepcopy(book)
    raw_entries = book.get("entries")
    entries = []
    if raw_entries is not None:
        for index, (key, raw) in enumerate(_items(raw_entries, "the character book")):
            if not isinstance(raw, dict):
                raise InteropError(f"character book entry {key} is not an object")
            entries.append(_book_entry(raw, index))
    name = book.get("name") if isinstance(book.get("name"), str) else ""
    extra = {key: value for key, value in book.items() if key not in ("name", "entries")}
    return {"name": name, "entries": _unique_uids(entries), "extra": extra, "settings": _book_settings(book)}


# A card book's own settings (Character Card V2): its field -> (the WorldBook setting, default).
CARD_BOOK_SETTINGS = {
    "scan_depth": ("scan_depth", 2),
    "token_budget": ("token_budget", 0),
    "recursive_scanning": ("recursive", True),
}
MAX_SCAN_DEPTH = 1000


def _book_settings(book: dict) -> dict:
    """Return the settings a card's book sets for itself, as WorldBook fields; bad values are left out."""
    settings: dict[str, Any] = {}
    for theirs, (ours, _) in CARD_BOOK_SETTINGS.items():
        value = book.get(theirs)
        if theirs == "recursive_scanning":
            if isinstance(value, bool):
                settings[ours] = value
        elif isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            if float(value).is_integer():
                settings[ours] = min(int(value), MAX_SCAN_DEPTH if ours == "scan_depth" else 2**31 - 1)
    return settings


def export_character_book(book: dict) -> dict:
    """Return the book as SillyTavern embeds it in a card (`character_book`)."""
    entries = _unique_uids([_renormalize(entry) for entry in book.get("entries") or []])
    out_entries = []
    for entry in entries:
        extra = entry["extra"]
        extensions = copy.deepcopy(extra["extensions"]) if isinstance(extra.get("extensions"), dict) else {}
        for ours, theirs in BOOK_EXTENSION_NAMES.items():
            extensions[theirs] = copy.deepcopy(entry[ours])
        extensions["delay_until_recursion"] = _delay_until_recursion(entry["delay_until_recursion"])
        for theirs, (ours, default) in BOOK_EXTRA_EXTENSIONS.items():
            value = extra.get(ours, default)
            if value is not None:
                extensions[theirs] = value
        out = {
            "id": entry["uid"],
            "keys": entry["keys"],
            "secondary_keys": entry["secondary_keys"],
            "comment": entry["comment"],
            "content": entry["content"],
            "constant": entry["constant"],
            "selective": entry["selective"],
            "insertion_order": entry["order"],
            "enabled": entry["enabled"],
            "position": "before_char" if entry["position"] == 0 else "after_char",
        }
        for key, default in BOOK_EXTRA_ENTRY.items():
            out[key] = extra.get(key, default)
        out["extensions"] = extensions
        for key, value in extra.items():
            if key != "extensions" and key not in {ours for ours, _ in BOOK_EXTRA_EXTENSIONS.values()}:
                out.setdefault(key, value)
        out_entries.append(out)
    result: dict[str, Any] = {"entries": out_entries, "name": _text(book.get("name"))}
    extra = _dict(book.get("extra"))
    settings = _dict(book.get("settings"))
    for theirs, (ours, default) in CARD_BOOK_SETTINGS.items():
        if ours not in settings:
            continue
        kept = _book_settings(extra).get(ours) if theirs in extra else None
        if kept == settings[ours]:
            result[theirs] = copy.deepcopy(extra[theirs])  # as the file wrote it (3 or 3.0)
        elif theirs in extra or settings[ours] != default:
            result[theirs] = settings[ours]
    for key, value in extra.items():
        result.setdefault(key, copy.deepcopy(value))
    return result


def _converted(entries: list[tuple[int, dict]], name: str) -> dict:
    return {"name": name, "entries": _unique_uids([_normalize(v, {}) for _, v in entries]), "extra": {}}


def _list_entries(obj: dict, key: str, what: str) -> list[tuple[int, dict]]:
    items = _items(obj.get(key), what)
    for index, raw in items:
        if not isinstance(raw, dict):
            raise InteropError(f"{what}'s entry {index + 1} is not an object")
    return items


def parse_novelai_lorebook(obj: dict, *, name: str = "") -> dict:
    """Return the normalized book of a NovelAI lorebook (`lorebookVersion`), as SillyTavern converts it."""
    entries = []
    for index, raw in _list_entries(obj, "entries", "the NovelAI lorebook"):
        context = _dict(raw.get("contextConfig"))
        values = {
            "uid": index,
            "keys": raw.get("keys"),
            "comment": raw.get("displayName"),
            "content": raw.get("text"),
            "selective": False,
            "order": context.get("budgetPriority", 0),
            "enabled": raw.get("enabled", True),
        }
        entries.append((index, values))
    return _converted(entries, name)


def parse_agnai_memory_book(obj: dict, *, name: str = "") -> dict:
    """Return the normalized book of an Agnai memory book (`kind: "memory"`)."""
    entries = []
    for index, raw in _list_entries(obj, "entries", "the Agnai memory book"):
        values = {
            "uid": index,
            "keys": raw.get("keywords"),
            "comment": raw.get("name"),
            "content": raw.get("entry"),
            "selective": False,
            "order": raw.get("weight"),
            "enabled": raw.get("enabled", True),
        }
        entries.append((index, values))
    return _converted(entries, name or _text(obj.get("name")))


def parse_risu_lorebook(obj: dict, *, name: str = "") -> dict:
    """Return the normalized book of a RisuAI lorebook (`type: "risu"`)."""
    entries = []
    for index, raw in _list_entries(obj, "data", "the RisuAI lorebook"):
        values = {
            "uid": index,
            "keys": _text(raw.get("key")),
            "secondary_keys": _text(raw.get("secondkey")),
            "comment": raw.get("comment"),
            "content": raw.get("content"),
            "constant": raw.get("alwaysActive", False),
            "selective": raw.get("selective", False),
            "order": raw.get("insertorder"),
        }
        if raw.get("activationPercent") is not None:
            values["probability"] = raw["activationPercent"]
        entries.append((index, values))
    return _converted(entries, name)


def parse_lorebook_v3(obj: dict, *, name: str = "") -> dict:
    """Return the normalized book of a Character Card V3 lorebook file (`spec: "lorebook_v3"`)."""
    book = parse_character_book(_dict(obj.get("data")))
    return {**book, "name": name or book["name"]}
