"""Tell which kind of SillyTavern (or neighbouring app's) file a decoded JSON object is.

`classify` looks only at the shape of the object: the fields each kind is written with. It never
guesses a character card from a lone `name`; what it cannot place is `None`, and `describe_unknown`
says what such an object holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

CARD_SPECS = ("chara_card_v2", "chara_card_v3")
# Fields that make an object without a spec a V1 (or TavernAI/Pygmalion) card, beside its name.
V1_CARD_FIELDS = frozenset(
    {
        "description",
        "personality",
        "scenario",
        "first_mes",
        "mes_example",
        "creatorcomment",
        "char_persona",
        "world_scenario",
        "char_greeting",
        "example_dialogue",
    }
)
CHAT_PRESET_FIELDS = frozenset({"prompts", "prompt_order", "openai_max_context", "chat_completion_source"})
INSTRUCT_FIELDS = frozenset(
    {
        "input_sequence",
        "output_sequence",
        "system_sequence",
        "first_output_sequence",
        "last_output_sequence",
        "system_sequence_prefix",
        "system_sequence_suffix",
        "stop_sequence",
    }
)
CONTEXT_FIELDS = frozenset({"story_string", "example_separator", "chat_start"})
SYSTEM_PROMPT_FIELDS = frozenset({"name", "content", "post_history"})
# Text-completion sampler presets: each backend writes its own names.
TEXT_SAMPLER_FIELDS = frozenset({"temp", "rep_pen"})
TEXTGEN_FIELDS = frozenset(
    {
        "typical_p",
        "mirostat_mode",
        "temperature_last",
        "dry_multiplier",
        "sampler_priority",
        "smoothing_factor",
        "min_temp",
        "penalty_alpha",
        "ban_eos_token",
        "freq_pen",
        "presence_pen",
    }
)
KOBOLD_FIELDS = frozenset({"typical", "mirostat", "rep_pen_slope", "tfs", "top_a", "sampler_order"})
NOVELAI_FIELDS = frozenset(
    {"tail_free_sampling", "phrase_rep_pen", "repetition_penalty_range", "repetition_penalty_slope"}
)
CHAT_HEADER_FIELDS = frozenset({"user_name", "character_name", "create_date", "chat_metadata"})
CHAT_MESSAGE_FIELDS = frozenset({"mes", "is_user", "send_date"})


@dataclass(frozen=True)
class Kind:
    """What a file is: `kind` for code, `label` for people ("a SillyTavern instruct template")."""

    # card | worldbook | chat_preset | text_preset | instruct | context | system_prompt | chat | other
    kind: str
    label: str
    format: str = ""  # the dialect within a kind: "novelai", "kobold", "lorebook_v3", ...


CARD = Kind("card", "a character card")
CHARX = Kind("card", "a CHARX character card", "charx")
WORLD_INFO = Kind("worldbook", "a SillyTavern World Info book", "sillytavern")
LOREBOOK_V3 = Kind("worldbook", "a Character Card V3 lorebook (lorebook_v3)", "lorebook_v3")
NOVELAI_LOREBOOK = Kind("worldbook", "a NovelAI lorebook", "novelai")
AGNAI_MEMORY_BOOK = Kind("worldbook", "an Agnai memory book", "agnai")
RISU_LOREBOOK = Kind("worldbook", "a RisuAI lorebook", "risu")
CHAT_PRESET = Kind("chat_preset", "a SillyTavern chat-completion preset")
TEXTGEN_PRESET = Kind("text_preset", "a text-completion preset (TextGen)", "textgen")
KOBOLD_PRESET = Kind("text_preset", "a text-completion preset (KoboldAI)", "kobold")
NOVELAI_PRESET = Kind("text_preset", "a text-completion preset (NovelAI)", "novelai")
INSTRUCT = Kind("instruct", "a SillyTavern instruct template")
CONTEXT = Kind("context", "a SillyTavern context template")
SYSTEM_PROMPT = Kind("system_prompt", "a SillyTavern system prompt")
CHAT = Kind("chat", "a SillyTavern chat")
QUICK_REPLIES = Kind("other", "a SillyTavern Quick Reply set")
THEME = Kind("other", "a SillyTavern UI theme")
SETTINGS = Kind("other", "a SillyTavern settings file")


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _text_preset(keys: set[str]) -> Kind | None:
    if "max_length" in keys and ("repetition_penalty" in keys or NOVELAI_FIELDS & keys):
        return NOVELAI_PRESET
    if not TEXT_SAMPLER_FIELDS & keys:
        return None
    if TEXTGEN_FIELDS & keys:
        return TEXTGEN_PRESET
    if KOBOLD_FIELDS & keys:
        return KOBOLD_PRESET
    return TEXTGEN_PRESET


def _world_book(obj: dict) -> Kind | None:
    data = obj.get("data")
    if obj.get("spec") == "lorebook_v3" and isinstance(data, dict):
        return LOREBOOK_V3
    if "lorebookVersion" in obj and isinstance(obj.get("entries"), list):
        return NOVELAI_LOREBOOK
    if obj.get("kind") == "memory" and isinstance(obj.get("entries"), list):
        return AGNAI_MEMORY_BOOK
    if obj.get("type") == "risu" and isinstance(data, list):
        return RISU_LOREBOOK
    if isinstance(obj.get("entries"), dict | list) and not {"spec", "data", "prompts"} & obj.keys():
        return WORLD_INFO
    return None


def classify(obj: Any) -> Kind | None:
    """Return the kind of a decoded JSON file, or None when it is no kind OrbChat knows."""
    if not isinstance(obj, dict):
        return None
    keys = set(obj)
    if obj.get("spec") in CARD_SPECS:
        return CARD
    book = _world_book(obj)
    if book is not None:
        return book
    if CHAT_PRESET_FIELDS & keys:
        return CHAT_PRESET
    if INSTRUCT_FIELDS & keys:
        return INSTRUCT
    if CONTEXT_FIELDS & keys:
        return CONTEXT
    text_preset = _text_preset(keys)
    if text_preset is not None:
        return text_preset
    if keys <= SYSTEM_PROMPT_FIELDS and _is_text(obj.get("name")) and _is_text(obj.get("content")):
        return SYSTEM_PROMPT
    if "chat_metadata" in keys or CHAT_MESSAGE_FIELDS <= keys:
        return CHAT
    if "quickReplySlots" in keys or "qrList" in keys:
        return QUICK_REPLIES
    if "main_text_color" in keys or "blur_strength" in keys:
        return THEME
    if {"power_user", "main_api"} <= keys:
        return SETTINGS
    inner = obj.get("data")
    if isinstance(inner, dict) and _is_text(inner.get("name")):
        return CARD
    if (_is_text(obj.get("name")) or _is_text(obj.get("char_name"))) and V1_CARD_FIELDS & keys:
        return CARD
    return None


def classify_jsonl(text: str) -> Kind | None:
    """Return CHAT when text is a JSON-lines chat (a header or a message on its first line)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    try:
        first = json.loads(lines[0])
    except (json.JSONDecodeError, RecursionError):
        return None
    if isinstance(first, dict) and (CHAT_HEADER_FIELDS & first.keys() or CHAT_MESSAGE_FIELDS & first.keys()):
        return CHAT
    return None


def describe_unknown(obj: Any) -> str:
    """Say what an unclassified JSON value holds, for a refusal message."""
    if not isinstance(obj, dict):
        return "the JSON is not an object"
    if not obj:
        return "the JSON object is empty"
    names = sorted(obj)
    shown = ", ".join(f'"{name}"' for name in names[:8])
    more = f" and {len(names) - 8} more" if len(names) > 8 else ""
    return f"a JSON object with the fields {shown}{more}"
