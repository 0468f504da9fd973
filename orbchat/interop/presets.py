"""SillyTavern chat-completion and text-completion presets to and from OrbChat's normalized preset.

A normalized preset is {"name", "sections", "samplers", "extra"}. `samplers` holds only the settings
the file sets (under OrbChat's names); `extra` keeps every other top-level key verbatim so an export
gives it back. Parsers return (preset, unmapped): the human-readable names of what did not map.
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
# SillyTavern's built-in prompts that hold text of their own: imported as literal sections.
ST_LITERALS = ("main", "nsfw", "jailbreak", "enhanceDefinitions")
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


def _samplers(
    obj: dict, table: dict[str, tuple[str, Callable[[Any], Any]]], skip: tuple[str, ...]
) -> tuple[dict, dict, list[str]]:
    """Split the top-level keys into (samplers, extra, unmapped names)."""
    samplers: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    unmapped: list[str] = []
    for key, value in obj.items():
        if key in skip:
            continue
        if key in table:
            ours, convert = table[key]
            try:
                samplers[ours] = convert(value)
                continue
            except (TypeError, ValueError, OverflowError):
                pass
        extra[key] = copy.deepcopy(value)
        unmapped.append(f'setting "{key}"')
    return samplers, extra, unmapped


def _load(data: bytes | str | dict, max_bytes: int) -> dict:
    obj = load_json(data, "the preset", max_bytes=max_bytes)
    if not isinstance(obj, dict):
        raise InteropError("the preset's JSON is not an object")
    return obj


def _pick_order(prompt_order: Any) -> list[tuple[str, bool]] | None:
    """Return [(identifier, enabled)] of the global order, or None when the preset has none."""
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
    if chosen is None:
        chosen = max(candidates, key=lambda item: len(item["order"]))
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
    return {
        "identifier": identifier,
        "kind": "marker" if marker else "literal",
        "marker": marker,
        "name": name,
        "role": prompt["role"] if prompt.get("role") in ROLES else "system",
        "text": "" if marker or not isinstance(content, str) else content,
        "enabled": enabled,
        "injection": injection,
        "depth": depth,
    }


def parse_chat_completion_preset(
    data: bytes | str | dict, *, name: str = "", max_bytes: int = MAX_BYTES
) -> tuple[dict, list[str]]:
    """Return (preset, unmapped) for a SillyTavern chat-completion preset."""
    obj = _load(data, max_bytes)
    samplers, extra, unmapped = _samplers(obj, CHAT_SAMPLERS, ("prompts", "prompt_order"))
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
    if order is None:
        order = [(identifier, prompt.get("enabled") is not False) for identifier, prompt in by_id.items()]
    else:
        # Prompts left out of the order stay available, switched off, as SillyTavern keeps them.
        listed = {identifier for identifier, _ in order}
        order += [(identifier, False) for identifier in by_id if identifier not in listed]
    sections = []
    seen: set[str] = set()
    for identifier, enabled in order:
        if identifier in seen:
            continue
        seen.add(identifier)
        section = _section(identifier, by_id.get(identifier), enabled, unmapped)
        if section is not None:
            sections.append(section)
    return {"name": name, "sections": sections, "samplers": samplers, "extra": extra}, unmapped


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


def _export_prompt(section: dict, identifier: str) -> dict:
    name = section.get("name") or DEFAULT_NAMES.get(identifier, identifier)
    role = section.get("role") if section.get("role") in ROLES else "system"
    position = 1 if section.get("injection") == "depth" else 0
    depth = section.get("depth", DEFAULT_DEPTH)
    prompt: dict[str, Any] = {"identifier": identifier, "name": name}
    if section.get("kind") == "marker":
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
    return prompt


def export_chat_completion_preset(preset: dict) -> dict:
    """Return the preset as a SillyTavern chat-completion preset (prompts and the global orders)."""
    samplers = preset.get("samplers") if isinstance(preset.get("samplers"), dict) else {}
    out: dict[str, Any] = {}
    for theirs, (ours, _) in CHAT_SAMPLERS.items():
        if ours not in samplers:
            continue
        value = samplers[ours]
        if ours == "seed" and value is None:
            value = -1
        if value is not None:
            out[theirs] = value
    extra = preset.get("extra") if isinstance(preset.get("extra"), dict) else {}
    for key, value in extra.items():
        if key not in ("prompts", "prompt_order"):
            out.setdefault(key, copy.deepcopy(value))
    prompts, order, used = [], [], set()
    for index, section in enumerate(preset.get("sections") or []):
        identifier = _export_identifier(section, index, used)
        if identifier is None:
            continue
        used.add(identifier)
        prompts.append(_export_prompt(section, identifier))
        order.append({"identifier": identifier, "enabled": bool(section.get("enabled", True))})
    out["prompts"] = prompts
    out["prompt_order"] = [
        {"character_id": 100000, "order": order},
        {"character_id": 100001, "order": copy.deepcopy(order)},
    ]
    return out


def parse_text_completion_preset(
    data: bytes | str | dict, *, name: str = "", max_bytes: int = MAX_BYTES
) -> tuple[dict, list[str]]:
    """Return (preset, unmapped) for a SillyTavern text-completion preset: samplers only."""
    obj = _load(data, max_bytes)
    samplers, extra, unmapped = _samplers(obj, TEXT_SAMPLERS, ())
    return {"name": name, "sections": [], "samplers": samplers, "extra": extra}, unmapped


def detect_preset_kind(obj: Any) -> str | None:
    """Return "chat" or "text" for a decoded preset, or None when it is neither."""
    if not isinstance(obj, dict):
        return None
    if {"prompts", "prompt_order", "openai_max_context"} & obj.keys():
        return "chat"
    if {"temp", "rep_pen"} & obj.keys():
        return "text"
    return None
