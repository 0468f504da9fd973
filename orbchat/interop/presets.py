"""SillyTavern chat-completion and text-completion presets to and from OrbChat's normalized preset.

A normalized preset is {"name", "sections", "samplers", "extra", "source"}. `samplers` holds only
the settings the file sets (under OrbChat's names); `extra` keeps every other top-level key verbatim,
including a chat-completion preset's own `prompts` and `prompt_order`, so an export gives the file
back: a prompt is written as it came with only what was edited in OrbChat changed. `source` says
where the preset came from: its `format` ("chat", or a text-completion dialect), its top-level
`keys` in order, and for each sampler it set, the file's `key` and `value` as written. Given also
`imported` (every sampler as it was saved at import), an export writes the file's samplers as the
file wrote them unless they were changed, and only the other samplers that were changed. Parsers
return (preset, unmapped): the human-readable names of what did not map.

SillyTavern presets have no place for OrbChat's Memory and author's note, and none for the card's
post-history instructions unless they hold the `jailbreak` prompt; the parser adds the missing ones
(marked `added`, left out of exports) where SillyTavern itself puts them.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

from orbchat.interop.errors import MAX_BYTES, InteropError, load_json

# SillyTavern prompt identifier -> our marker.
ST_MARKERS = {
    "worldInfoBefore": "world_info_before",
    "worldInfoAfter": "world_info_after",
    "charDescription": "char_description",
    "charPersonality": "char_personality",
    "scenario": "scenario",
    "personaDescription": "persona",
    "dialogueExamples": "example_dialogue",
    "chatHistory": "chat_history",
}
# Markers that carry text of their own (the text a card may override).
TEXT_MARKERS = ("post_history",)
MARKER_TO_ST = {marker: identifier for identifier, marker in ST_MARKERS.items()}
OUR_MARKERS = (
    "main_prompt",
    "world_info_before",
    "world_info_after",
    "char_description",
    "char_personality",
    "scenario",
    "persona",
    "example_dialogue",
    "chat_history",
    "memory",
    "post_history",
    "authors_note",
)
# SillyTavern's built-in prompts that hold text of their own: imported as literal sections, but for
# the post-history prompt, which becomes the post-history marker: its text, unless the card's own
# instructions replace it (a preset that also holds OrbChat's own marker keeps it a literal).
ST_LITERALS = ("main", "nsfw", "jailbreak", "enhanceDefinitions")
POST_HISTORY_PROMPT = "jailbreak"
# Sections an import adds when the preset has no marker for them -> where they go, in words.
ADDED_PLACES = {
    "memory": "after the chat history",
    "authors_note": "in the chat history at the author's note's own depth, with its world info",
    "post_history": "after the chat history, for the card's post-history instructions",
}
DEFAULT_NAMES = {
    "main": "Main Prompt",
    "nsfw": "Auxiliary Prompt",
    "jailbreak": "Post-History Instructions",
    "enhanceDefinitions": "Enhance Definitions",
    "worldInfoBefore": "World Info (before)",
    "worldInfoAfter": "World Info (after)",
    "charDescription": "Char Description",
    "charPersonality": "Char Personality",
    "scenario": "Scenario",
    "personaDescription": "Persona Description",
    "dialogueExamples": "Chat Examples",
    "chatHistory": "Chat History",
    "main_prompt": "Main prompt",
    "memory": "Memory",
    "post_history": "Post-history instructions",
    "authors_note": "Author's note",
}
ROLES = ("system", "user", "assistant")
# SillyTavern's live global prompt order is 100001; 100000 is the older default it still ships.
GLOBAL_ORDER_IDS = (100001, 100000)
DEFAULT_DEPTH = 4


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(value)
    return number


def _count(value: Any) -> int:
    return max(0, int(_float(value)))


def _seed(value: Any) -> int | None:
    if value is None:
        return None
    number = int(_float(value))
    return None if number < 0 else number


CHAT_SAMPLERS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "temperature": ("temperature", _float),
    "top_p": ("top_p", _float),
    "top_k": ("top_k", _count),
    "min_p": ("min_p", _float),
    "frequency_penalty": ("frequency_penalty", _float),
    "presence_penalty": ("presence_penalty", _float),
    "repetition_penalty": ("repetition_penalty", _float),
    "openai_max_tokens": ("max_tokens", _count),
    "openai_max_context": ("context_size", _count),
    "seed": ("seed", _seed),
}
TEXT_SAMPLERS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "temp": ("temperature", _float),
    "top_p": ("top_p", _float),
    "top_k": ("top_k", _count),
    "min_p": ("min_p", _float),
    "rep_pen": ("repetition_penalty", _float),
    "freq_pen": ("frequency_penalty", _float),
    "presence_pen": ("presence_penalty", _float),
    "genamt": ("max_tokens", _count),
    "seed": ("seed", _seed),
}
NOVELAI_SAMPLERS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "temperature": ("temperature", _float),
    "top_p": ("top_p", _float),
    "top_k": ("top_k", _count),
    "min_p": ("min_p", _float),
    "repetition_penalty": ("repetition_penalty", _float),
    "max_length": ("max_tokens", _count),
    "max_context": ("context_size", _count),
}


TEXT_DIALECTS = {"textgen": TEXT_SAMPLERS, "kobold": TEXT_SAMPLERS, "novelai": NOVELAI_SAMPLERS}
CHAT_FORMAT = "chat"


def _converted(value: Any, convert: Callable[[Any], Any]) -> tuple[bool, Any]:
    try:
        return True, convert(value)
    except (TypeError, ValueError, OverflowError):
        return False, None


def _samplers(
    obj: dict, table: dict[str, tuple[str, Callable[[Any], Any]]], skip: tuple[str, ...]
) -> tuple[dict, dict, list[str], dict]:
    """Split the top-level keys into (samplers, extra, unmapped names, the file's own sampler values)."""
    samplers: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    unmapped: list[str] = []
    found: dict[str, dict] = {}
    for key, value in obj.items():
        if key in skip:
            continue
        if key in table:
            ours, convert = table[key]
            ok, converted = _converted(value, convert)
            if ok:
                samplers[ours] = converted
                found[ours] = {"key": key, "value": copy.deepcopy(value)}
                continue
        extra[key] = copy.deepcopy(value)
        unmapped.append(f'setting "{key}"')
    return samplers, extra, unmapped, found


def _load(data: bytes | str | dict, max_bytes: int) -> dict:
    obj = load_json(data, "the preset", max_bytes=max_bytes)
    if not isinstance(obj, dict):
        raise InteropError("the preset's JSON is not an object")
    return obj


def _global_order(prompt_order: Any) -> dict | None:
    """Return the prompt order entry SillyTavern uses for every character, or None when there is none."""
    if not isinstance(prompt_order, list):
        return None
    candidates = [
        item for item in prompt_order if isinstance(item, dict) and isinstance(item.get("order"), list)
    ]
    if not candidates:
        return None
    by_id: dict[Any, dict] = {}
    for item in candidates:
        character_id = item.get("character_id")
        by_id.setdefault(int(character_id) if str(character_id).isdigit() else character_id, item)
    chosen = next((by_id[i] for i in GLOBAL_ORDER_IDS if i in by_id and by_id[i]["order"]), None)
    return chosen or max(candidates, key=lambda item: len(item["order"]))


def _pick_order(prompt_order: Any) -> list[tuple[str, bool]] | None:
    """Return [(identifier, enabled)] of the global order, or None when the preset has none."""
    chosen = _global_order(prompt_order)
    if chosen is None:
        return None
    order = []
    for item in chosen["order"]:
        if isinstance(item, dict) and isinstance(item.get("identifier"), str) and item["identifier"]:
            order.append((item["identifier"], item.get("enabled", True) is not False))
    return order


def _section(identifier: str, prompt: dict | None, enabled: bool, unmapped: list[str]) -> dict | None:
    prompt = prompt or {}
    name = prompt.get("name") if isinstance(prompt.get("name"), str) and prompt["name"] else None
    name = name or DEFAULT_NAMES.get(identifier, identifier)
    marker = ST_MARKERS.get(identifier) or (identifier if identifier in OUR_MARKERS else None)
    if marker is None and prompt.get("marker"):
        unmapped.append(f'prompt "{name}" (marker {identifier})')
        return None
    if marker is None and not prompt and identifier not in ST_LITERALS:
        unmapped.append(f'prompt "{identifier}" (in the order but not defined)')
        return None
    try:
        injection = "depth" if int(_float(prompt.get("injection_position", 0))) == 1 else "relative"
    except ValueError:
        injection = "relative"
    try:
        depth = _count(prompt.get("injection_depth", DEFAULT_DEPTH))
    except ValueError:
        depth = DEFAULT_DEPTH
    content = prompt.get("content")
    has_text = marker is None or marker in TEXT_MARKERS
    return {
        "identifier": identifier,
        "kind": "marker" if marker else "literal",
        "marker": marker,
        "name": name,
        "role": prompt["role"] if prompt.get("role") in ROLES else "system",
        "text": content if has_text and isinstance(content, str) else "",
        "enabled": enabled,
        "injection": injection,
        "depth": depth,
        "forbid_overrides": prompt.get("forbid_overrides") is True,
    }


def _added(marker: str) -> dict:
    return {
        "identifier": marker,
        "kind": "marker",
        "marker": marker,
        "name": DEFAULT_NAMES[marker],
        "role": "system",
        "text": "",
        "enabled": True,
        # An author's note "in order" goes in at the note's own depth (see prompting.assemble).
        "injection": "relative",
        "depth": DEFAULT_DEPTH,
        "forbid_overrides": False,
        "added": True,
    }


def _add_missing(sections: list[dict]) -> None:
    """Add Memory, the author's note and post-history instructions after the chat history, when missing."""
    present = {section["marker"] for section in sections if section["kind"] == "marker"}
    at = next((i + 1 for i, s in enumerate(sections) if s["marker"] == "chat_history"), len(sections))
    for marker in ADDED_PLACES:
        if marker not in present:
            sections.insert(at, _added(marker))
            at += 1


def parse_chat_completion_preset(
    data: bytes | str | dict, *, name: str = "", max_bytes: int = MAX_BYTES
) -> tuple[dict, list[str]]:
    """Return (preset, unmapped) for a SillyTavern chat-completion preset."""
    obj = _load(data, max_bytes)
    samplers, extra, unmapped, found = _samplers(obj, CHAT_SAMPLERS, ("prompts", "prompt_order"))
    prompts = obj.get("prompts")
    if prompts is None:
        prompts = []
    if not isinstance(prompts, list):
        raise InteropError("the preset's 'prompts' is not a list")
    by_id: dict[str, dict] = {}
    for index, prompt in enumerate(prompts, start=1):
        identifier = prompt.get("identifier") if isinstance(prompt, dict) else None
        if not isinstance(identifier, str) or not identifier:
            unmapped.append(f"prompt {index} (it has no identifier)")
            continue
        by_id.setdefault(identifier, prompt)

    order = _pick_order(obj.get("prompt_order"))
    unlisted: set[str] = set()
    if order is None:
        order = [(identifier, prompt.get("enabled") is not False) for identifier, prompt in by_id.items()]
    else:
        # Prompts left out of the order stay available, switched off, as SillyTavern keeps them.
        listed = {identifier for identifier, _ in order}
        unlisted = {identifier for identifier in by_id if identifier not in listed}
        order += [(identifier, False) for identifier in by_id if identifier in unlisted]
    sections = []
    seen: set[str] = set()
    has_own_post_history = "post_history" in by_id or any(i == "post_history" for i, _ in order)
    for identifier, enabled in order:
        if identifier in seen:
            continue
        seen.add(identifier)
        section = _section(identifier, by_id.get(identifier), enabled, unmapped)
        if section is None:
            continue
        if identifier == POST_HISTORY_PROMPT and not has_own_post_history:
            section.update(kind="marker", marker="post_history")
        if identifier in unlisted:
            section["unlisted"] = True
        sections.append(section)
    _add_missing(sections)
    extra["prompts"] = copy.deepcopy(prompts)
    if "prompt_order" in obj:
        extra["prompt_order"] = copy.deepcopy(obj["prompt_order"])
    source = {"format": CHAT_FORMAT, "keys": list(obj), "samplers": found}
    preset = {"name": name, "sections": sections, "samplers": samplers, "extra": extra, "source": source}
    return preset, unmapped


def _export_identifier(section: dict, index: int, used: set[str]) -> str | None:
    if section.get("kind") == "marker":
        marker = section.get("marker")
        identifier = MARKER_TO_ST.get(marker) or (marker if marker in OUR_MARKERS else None)
        # A marker appears once in a prompt order; a repeat would mean nothing to SillyTavern.
        return None if identifier is None or identifier in used else identifier
    identifier = section.get("identifier") if isinstance(section.get("identifier"), str) else ""
    identifier = identifier or f"custom_{index}"
    reserved = used | ST_MARKERS.keys() | set(OUR_MARKERS)
    candidate, suffix = identifier, 2
    while candidate in reserved:
        candidate, suffix = f"{identifier}_{suffix}", suffix + 1
    return candidate


def _st_fields(section: dict) -> dict:
    """Return the prompt fields a section sets, under SillyTavern's names."""
    fields: dict[str, Any] = {
        "name": section.get("name") or "",
        "role": section.get("role") if section.get("role") in ROLES else "system",
        "injection_position": 1 if section.get("injection") == "depth" else 0,
        "injection_depth": section.get("depth", DEFAULT_DEPTH),
        "forbid_overrides": bool(section.get("forbid_overrides")),
    }
    if section.get("kind") != "marker" or section.get("marker") in TEXT_MARKERS:
        fields["content"] = section.get("text") or ""
    return fields


def _export_prompt(section: dict, identifier: str) -> dict:
    name = section.get("name") or DEFAULT_NAMES.get(identifier, identifier)
    role = section.get("role") if section.get("role") in ROLES else "system"
    position = 1 if section.get("injection") == "depth" else 0
    depth = section.get("depth", DEFAULT_DEPTH)
    prompt: dict[str, Any] = {"identifier": identifier, "name": name}
    if section.get("kind") == "marker" and section.get("marker") not in TEXT_MARKERS:
        prompt.update(system_prompt=True, marker=True)
        if role != "system":
            prompt["role"] = role
        if position or depth != DEFAULT_DEPTH:
            prompt.update(injection_position=position, injection_depth=depth)
        return prompt
    prompt.update(
        system_prompt=identifier in ST_LITERALS,
        role=role,
        content=section.get("text") or "",
        marker=False,
        injection_position=position,
        injection_depth=depth,
    )
    if section.get("forbid_overrides"):
        prompt["forbid_overrides"] = True
    return prompt


def _merge_prompt(raw: dict, section: dict) -> dict:
    """Return the prompt as the file had it, with what was changed in OrbChat written over it."""
    identifier = raw["identifier"]
    before = _st_fields(_section(identifier, raw, True, []) or {})
    out = copy.deepcopy(raw)
    for key, value in _st_fields(section).items():
        if before.get(key) != value:
            out[key] = value
    return out


def _is_used(raw: Any) -> bool:
    """Tell whether a prompt of the file becomes a section (the rest are kept only for export)."""
    identifier = raw.get("identifier") if isinstance(raw, dict) else None
    return isinstance(identifier, str) and bool(identifier) and bool(_section(identifier, raw, True, []))


def _export_order(raw_order: list, order: list[dict], by_id: dict[str, dict], present: set[str]) -> list:
    """Return the global order: OrbChat's sections, and where they were, the file's unmapped entries."""
    result = list(order)
    previous: str | None = None
    for item in raw_order:
        identifier = item.get("identifier") if isinstance(item, dict) else None
        if identifier in present:
            previous = identifier
            continue
        if isinstance(identifier, str) and _section(identifier, by_id.get(identifier), True, []):
            continue  # a section the user deleted
        at = next((i + 1 for i, o in enumerate(result) if o.get("identifier") == previous), 0)
        result.insert(at, copy.deepcopy(item))
        previous = identifier
    return result


def _file_value(ours: str, value: Any, written: Any) -> Any:
    """Return a sampler's OrbChat value as a file writes it; `written` is what the file had, if anything."""
    if value is None:
        return -1 if ours == "seed" else written
    if isinstance(value, float) and value.is_integer() and type(written) is int:
        return int(value)  # the file wrote a whole number there: keep it one
    return value


def _all_samplers(samplers: dict, table: dict[str, tuple[str, Callable[[Any], Any]]]) -> dict:
    """Return every sampler OrbChat has a value for, under the file's names (a preset made in OrbChat)."""
    out: dict[str, Any] = {}
    for theirs, (ours, _) in table.items():
        if ours in samplers:
            value = _file_value(ours, samplers[ours], None)
            if value is not None:
                out[theirs] = value
    return out


def _changed_samplers(
    samplers: dict, source: dict, table: dict[str, tuple[str, Callable[[Any], Any]]]
) -> dict:
    """Return the samplers an imported preset's export writes, under the file's names.

    The file's own are written as the file wrote them unless they were changed in OrbChat; the
    others only when they were changed since the import (`source["imported"]`).
    """
    names = {ours: theirs for theirs, (ours, _) in table.items()}
    had = source.get("samplers") if isinstance(source.get("samplers"), dict) else {}
    imported = source.get("imported") if isinstance(source.get("imported"), dict) else {}
    out: dict[str, Any] = {}
    for ours, value in samplers.items():
        entry = had.get(ours) if isinstance(had.get(ours), dict) else None
        key = entry["key"] if entry and entry.get("key") in table else names.get(ours)
        if key is None:
            continue  # the format has no name for it (a TextGen preset's context size)
        if ours in imported:
            unchanged = value == imported[ours]
        elif entry:
            unchanged = _converted(entry.get("value"), table[key][1]) == (True, value)
        else:
            unchanged = False  # set in OrbChat with nothing to compare to
        written = copy.deepcopy(entry.get("value")) if entry else None
        value = written if unchanged else _file_value(ours, value, written)
        if entry or value is not None:
            out[key] = value  # a key of the file is always written, `null` included
    return out


def _in_file_order(out: dict, keys: Any) -> dict:
    """Return `out` with the file's keys first, in the file's order, then any new ones."""
    order = [key for key in keys if key in out] if isinstance(keys, list) else []
    return {**{key: out[key] for key in order}, **out}


def export_preset(preset: dict) -> dict:
    """Return the preset in the format it was imported from (a chat-completion preset when made here)."""
    source = preset.get("source") if isinstance(preset.get("source"), dict) else {}
    if source.get("format") in TEXT_DIALECTS:
        return export_text_completion_preset(preset)
    return export_chat_completion_preset(preset)


def export_text_completion_preset(preset: dict) -> dict:
    """Return an imported text-completion preset as its file, with the samplers changed since written over."""
    source = preset.get("source") if isinstance(preset.get("source"), dict) else {}
    table = TEXT_DIALECTS.get(source.get("format"), TEXT_SAMPLERS)
    samplers = preset.get("samplers") if isinstance(preset.get("samplers"), dict) else {}
    extra = preset.get("extra") if isinstance(preset.get("extra"), dict) else {}
    out = {**copy.deepcopy(extra), **_changed_samplers(samplers, source, table)}
    return _in_file_order(out, source.get("keys"))


def export_chat_completion_preset(preset: dict) -> dict:
    """Return the preset as a SillyTavern chat-completion preset (prompts and the global order).

    An imported preset gives back the samplers its file had and those changed since; a preset made
    in OrbChat writes every sampler it has.
    """
    samplers = preset.get("samplers") if isinstance(preset.get("samplers"), dict) else {}
    source = preset.get("source") if isinstance(preset.get("source"), dict) else {}
    if source.get("format") == CHAT_FORMAT:
        out = _changed_samplers(samplers, source, CHAT_SAMPLERS)
    else:
        out = _all_samplers(samplers, CHAT_SAMPLERS)
    extra = preset.get("extra") if isinstance(preset.get("extra"), dict) else {}
    for key, value in extra.items():
        if key not in ("prompts", "prompt_order"):
            out.setdefault(key, copy.deepcopy(value))
    raw_prompts = extra.get("prompts") if isinstance(extra.get("prompts"), list) else []
    by_id: dict[str, dict] = {}
    for raw in raw_prompts:
        if isinstance(raw, dict) and isinstance(raw.get("identifier"), str) and raw["identifier"]:
            by_id.setdefault(raw["identifier"], raw)

    sections = [s for s in preset.get("sections") or [] if isinstance(s, dict) and not s.get("added")]
    written: dict[str, dict] = {}
    order, used = [], set(by_id)
    for index, section in enumerate(sections):
        identifier = section.get("identifier")
        if identifier in by_id and identifier not in written:
            written[identifier] = _merge_prompt(by_id[identifier], section)
        else:
            identifier = _export_identifier(section, index, used | written.keys())
            if identifier is None:
                continue
            written[identifier] = _export_prompt(section, identifier)
        if not (section.get("unlisted") and not section.get("enabled", True)):
            order.append({"identifier": identifier, "enabled": bool(section.get("enabled", True))})

    prompts, emitted = [], set()
    for raw in raw_prompts:
        identifier = raw.get("identifier") if isinstance(raw, dict) else None
        if identifier in written and identifier not in emitted:
            prompts.append(written[identifier])
            emitted.add(identifier)
        elif identifier in emitted or not _is_used(raw):
            prompts.append(copy.deepcopy(raw))  # a prompt OrbChat does not use
    prompts += [prompt for identifier, prompt in written.items() if identifier not in emitted]
    out["prompts"] = prompts

    raw_order = extra.get("prompt_order")
    chosen = _global_order(raw_order)
    if chosen is None:
        out["prompt_order"] = [
            {"character_id": 100000, "order": order},
            {"character_id": 100001, "order": copy.deepcopy(order)},
        ]
        return _in_file_order(out, source.get("keys"))
    out["prompt_order"] = [
        {**copy.deepcopy(item), "order": _export_order(chosen["order"], order, by_id, set(written))}
        if item is chosen
        else copy.deepcopy(item)
        for item in raw_order
    ]
    return _in_file_order(out, source.get("keys"))


def parse_text_completion_preset(
    data: bytes | str | dict, *, name: str = "", dialect: str = "textgen", max_bytes: int = MAX_BYTES
) -> tuple[dict, list[str]]:
    """Return (preset, unmapped) for a text-completion preset: samplers only.

    `dialect` is "textgen" or "kobold" (SillyTavern's names: `temp`, `rep_pen`, ...) or "novelai".
    """
    obj = _load(data, max_bytes)
    if dialect not in TEXT_DIALECTS:
        raise ValueError(f"unknown text-completion dialect {dialect!r}")
    samplers, extra, unmapped, found = _samplers(obj, TEXT_DIALECTS[dialect], ())
    source = {"format": dialect, "keys": list(obj), "samplers": found}
    return {"name": name, "sections": [], "samplers": samplers, "extra": extra, "source": source}, unmapped
