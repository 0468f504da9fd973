"""export(import(file)) against the file, field by field, over a corpus of SillyTavern files.

The corpus is built here from the formats as SillyTavern writes them (its `default/content`
files, `src/endpoints/characters.js`, `public/scripts/world-info.js`, the chat JSONL of
`public/script.js`, the CCv3 spec for CHARX), plus the real files in /work/shared/fixtures when
they are present. Every difference found must be one of the normalisations documented in
docs/sillytavern.md ("Round trips"); anything else fails the test.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from orbchat.interop import chats as chat_codec
from orbchat.interop import png
from orbchat.library import services
from rooms import chatfiles
from tests.library.cards import portrait

pytestmark = pytest.mark.django_db

FIXTURES = Path("/work/shared/fixtures/sillytavern")


# --- The corpus -------------------------------------------------------------------------------


def v2_data(name: str, **over) -> dict:
    data = {
        "name": name,
        "description": "{{char}} is a lighthouse keeper on a foggy island.",
        "personality": "patient, dry humour",
        "scenario": "A storm is coming.",
        "first_mes": '*{{char}} looks up from the lamp.* "You made it, {{user}}."',
        "mes_example": "<START>\n{{user}}: Any ships tonight?\n{{char}}: *shakes head* Not one.",
        "creator_notes": "Written for the round-trip corpus.",
        "system_prompt": "",
        "post_history_instructions": "Stay in character.",
        "tags": ["fantasy", "slow burn"],
        "creator": "corpus",
        "character_version": "1.2",
        "alternate_greetings": ["*The lamp flickers.*"],
        "extensions": {
            "talkativeness": "0.5",
            "fav": False,
            "world": "",
            "depth_prompt": {"prompt": "{{char}} never leaves the lamp.", "depth": 4, "role": "system"},
        },
        "group_only_greetings": [],
        **over,
    }
    return data


def st_v2(name: str, **over) -> dict:
    """A V2 card as SillyTavern 1.12 writes it: the V1 mirror at the top, then spec and data."""
    data = v2_data(name, **over)
    return {
        "name": data["name"],
        "description": data["description"],
        "personality": data["personality"],
        "scenario": data["scenario"],
        "first_mes": data["first_mes"],
        "mes_example": data["mes_example"],
        "creatorcomment": data["creator_notes"],
        "avatar": "none",
        "chat": f"{name} - 2024-7-12 @01h31m37s 123ms",
        "talkativeness": "0.5",
        "fav": False,
        "tags": data["tags"],
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": data,
        "create_date": "2024-7-12 @01h31m37s 123ms",
    }


def st_v3(name: str, **over) -> dict:
    card = st_v2(name, **over)
    card["spec"], card["spec_version"] = "chara_card_v3", "3.0"
    card["data"].update(
        {
            "group_only_greetings": ["*{{char}} counts the guests.*"],
            "nickname": name.split()[0],
            "creation_date": 1720747897,
            "modification_date": 1720747999,
            "source": ["https://example.invalid/cards/1"],
            "creator_notes_multilingual": {"fr": "Écrit pour le corpus."},
            "assets": [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}],
        }
    )
    return card


CHARACTER_BOOK = {
    "name": "Harbour lore",
    "description": "",
    "scan_depth": 4,
    "token_budget": 512,
    "recursive_scanning": False,
    "extensions": {},
    "entries": [
        {
            "id": 0,
            "keys": ["lamp", "lighthouse"],
            "secondary_keys": [],
            "comment": "The lamp",
            "content": "The lamp burns whale oil.",
            "constant": False,
            "selective": True,
            "insertion_order": 100,
            "enabled": True,
            "position": "after_char",
            "use_regex": True,
            "extensions": {
                "position": 1,
                "exclude_recursion": False,
                "display_index": 0,
                "probability": 100,
                "useProbability": True,
                "depth": 4,
                "selectiveLogic": 0,
                "group": "",
                "group_override": False,
                "group_weight": 100,
                "prevent_recursion": False,
                "delay_until_recursion": False,
                "scan_depth": None,
                "match_whole_words": None,
                "use_group_scoring": False,
                "case_sensitive": None,
                "automation_id": "",
                "role": 0,
                "vectorized": False,
                "sticky": 0,
                "cooldown": 0,
                "delay": 0,
            },
        }
    ],
}


def wi_entry(uid: int, **over) -> dict:
    """A World Info entry with every field SillyTavern 1.12 writes."""
    entry = {
        "uid": uid,
        "key": ["harbour"],
        "keysecondary": [],
        "comment": f"Entry {uid}",
        "content": "The harbour freezes in winter.",
        "constant": False,
        "vectorized": False,
        "selective": True,
        "selectiveLogic": 0,
        "addMemo": True,
        "order": 100,
        "position": 0,
        "disable": False,
        "excludeRecursion": False,
        "preventRecursion": False,
        "delayUntilRecursion": False,
        "probability": 100,
        "useProbability": True,
        "depth": 4,
        "group": "",
        "groupOverride": False,
        "groupWeight": 100,
        "scanDepth": None,
        "caseSensitive": None,
        "matchWholeWords": None,
        "useGroupScoring": None,
        "automationId": "",
        "role": None,
        "sticky": 0,
        "cooldown": 0,
        "delay": 0,
        "displayIndex": uid,
        **over,
    }
    return entry


def b64(obj: dict) -> str:
    return base64.b64encode(json.dumps(obj, ensure_ascii=False).encode()).decode()


def png_card(**chunks: dict) -> bytes:
    return png.write_text_chunks(portrait(), [(k, b64(v)) for k, v in chunks.items()], drop=set())


def charx_file(card: dict, files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("card.json", json.dumps(card, ensure_ascii=False))
        for path, content in files.items():
            archive.writestr(path, content)
    return out.getvalue()


def jsonl(*objs: dict) -> bytes:
    return "\n".join(json.dumps(o, ensure_ascii=False) for o in objs).encode()


def chat_message(name: str, is_user: bool, mes: str, date: str, **over) -> dict:
    msg = {
        "name": name,
        "is_user": is_user,
        "is_system": False,
        "send_date": date,
        "mes": mes,
        "swipes": [mes],
        "swipe_id": 0,
        "swipe_info": [{"send_date": date, "gen_started": None, "gen_finished": None, "extra": {}}],
        "extra": {},
    }
    msg.update(over)
    return msg


def corpus() -> dict[str, bytes]:
    v3_charx = st_v3("Ione Marsh")
    v3_charx["data"]["assets"] = [
        {"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"},
        {"type": "emotion", "uri": "embeded://assets/emotion/images/joy.png", "name": "joy", "ext": "png"},
    ]
    files = {
        "cards/v1.json": json.dumps(
            {
                "name": "Old Tom",
                "description": "A fisherman.",
                "personality": "gruff",
                "scenario": "The docks.",
                "first_mes": "Hrm.",
                "mes_example": "<START>\n{{char}}: Hrm.",
            }
        ),
        "cards/v2.json": json.dumps(st_v2("Maren Tallis")),
        "cards/v2_book.json": json.dumps(st_v2("Maren Tallis", character_book=CHARACTER_BOOK)),
        "cards/v3.json": json.dumps(st_v3("Ione Marsh")),
        "cards/v3_cjk.json": json.dumps(
            st_v3("林小雨", description="{{char}}是一位住在山里的画家。", tags=["原创", "日常"]),
            ensure_ascii=False,
        ),
        "cards/v2.png": png_card(chara=st_v2("Maren Tallis")),
        "cards/v3.png": png_card(chara=st_v2("Ione Marsh"), ccv3=st_v3("Ione Marsh")),
        "cards/v3.charx": charx_file(
            v3_charx,
            {
                "assets/icon/images/main.png": portrait("#224466"),
                "assets/emotion/images/joy.png": portrait("#ffcc00"),
                "module.risum": b"risu module",
            },
        ),
        "books/world_info.json": json.dumps(
            {
                "entries": {
                    "0": wi_entry(0),
                    "1": wi_entry(1, key=["/ice|snow/i"], position=4, role=1, depth=2),
                }
            }
        ),
        "books/world_info_minimal.json": json.dumps(
            {
                "entries": {
                    "0": {"uid": 0, "key": ["tide"], "keysecondary": [], "content": "Tides.", "comment": ""}
                }
            }
        ),
        "books/novelai.lorebook": json.dumps(
            {
                "lorebookVersion": 5,
                "entries": [{"text": "The guild of tides.", "displayName": "Guild", "keys": ["guild"]}],
            }
        ),
        "books/agnai.json": json.dumps(
            {
                "kind": "memory",
                "name": "Agnai",
                "entries": [{"name": "Ink", "entry": "Ink is rare.", "keywords": ["ink"]}],
            }
        ),
        "books/risu.json": json.dumps(
            {
                "type": "risu",
                "ver": 1,
                "data": [{"key": "salt, sea", "content": "Salt is money.", "comment": "Salt"}],
            }
        ),
        "presets/chat_completion.json": json.dumps(
            {
                "temperature": 0.9,
                "frequency_penalty": 0,
                "presence_penalty": 0,
                "top_p": 1,
                "top_k": 0,
                "min_p": 0,
                "openai_max_context": 8192,
                "openai_max_tokens": 300,
                "stream_openai": True,
                "prompts": [
                    {
                        "name": "Main Prompt",
                        "system_prompt": True,
                        "role": "system",
                        "content": "Write {{char}}.",
                        "identifier": "main",
                    },
                    {
                        "name": "Jailbreak",
                        "system_prompt": True,
                        "role": "system",
                        "content": "",
                        "identifier": "jailbreak",
                    },
                    {
                        "identifier": "chatHistory",
                        "name": "Chat History",
                        "system_prompt": True,
                        "marker": True,
                    },
                    {
                        "identifier": "charDescription",
                        "name": "Char Description",
                        "system_prompt": True,
                        "marker": True,
                    },
                    {
                        "identifier": "x1",
                        "name": "Style",
                        "role": "user",
                        "content": "Short replies.",
                        "injection_position": 1,
                        "injection_depth": 2,
                        "injection_order": 100,
                        "injection_trigger": [],
                        "forbid_overrides": False,
                        "enabled": True,
                    },
                ],
                "prompt_order": [
                    {
                        "character_id": 100001,
                        "order": [
                            {"identifier": "main", "enabled": True},
                            {"identifier": "charDescription", "enabled": True},
                            {"identifier": "chatHistory", "enabled": True},
                            {"identifier": "x1", "enabled": True},
                            {"identifier": "jailbreak", "enabled": True},
                        ],
                    }
                ],
            }
        ),
        "presets/textgen.json": json.dumps(
            {
                "temp": 0.7,
                "top_p": 0.9,
                "top_k": 40,
                "typical_p": 1,
                "min_p": 0,
                "rep_pen": 1.1,
                "rep_pen_range": 0,
                "dry_multiplier": 0,
            }
        ),
        "presets/kobold.json": json.dumps(
            {
                "temp": 0.7,
                "rep_pen": 1.1,
                "rep_pen_range": 1024,
                "top_p": 0.92,
                "top_a": 0,
                "top_k": 0,
                "typical": 1,
                "tfs": 1,
                "sampler_order": [6, 0, 1, 3, 4, 2, 5],
            }
        ),
        "presets/novelai.json": json.dumps(
            {
                "temperature": 1.25,
                "max_length": 150,
                "min_length": 1,
                "top_k": 0,
                "top_p": 0.9,
                "repetition_penalty": 1.9,
                "tail_free_sampling": 0.925,
            }
        ),
        "templates/instruct.json": json.dumps(
            {
                "input_sequence": "<|im_start|>user",
                "output_sequence": "<|im_start|>assistant",
                "system_sequence": "<|im_start|>system",
                "stop_sequence": "<|im_end|>",
                "wrap": True,
                "macro": True,
                "names_behavior": "force",
                "name": "ChatML (corpus)",
            }
        ),
        "templates/context.json": json.dumps(
            {
                "story_string": (
                    "{{#if system}}{{system}}\n{{/if}}{{#if description}}{{description}}\n{{/if}}"
                ),
                "example_separator": "***",
                "chat_start": "***",
                "use_stop_strings": False,
                "trim_sentences": False,
                "name": "Default (corpus)",
            }
        ),
        "templates/system_prompt.json": json.dumps(
            {"name": "Roleplay (corpus)", "content": "You're {{char}}."}
        ),
        "chats/solo.jsonl": jsonl(
            {
                "user_name": "Ada",
                "character_name": "Maren Tallis",
                "create_date": "2024-7-12@01h31m37s",
                "chat_metadata": {
                    "note_prompt": "Keep it foggy.",
                    "note_interval": 1,
                    "note_position": 1,
                    "note_depth": 4,
                    "note_role": 0,
                    "variables": {"mood": "calm"},
                    "timedWorldInfo": {"sticky": {}, "cooldown": {}},
                },
            },
            chat_message(
                "Maren Tallis",
                False,
                "You made it.",
                "2024-07-12T01:31:37.000Z",
                extra={"api": "openai", "model": "gpt-4o", "token_count": 4},
            ),
            chat_message(
                "Ada",
                True,
                "Barely.",
                "2024-07-12T01:32:00.000Z",
                extra={"isSmallSys": False},
                force_avatar="User Avatars/ada.png",
            ),
            chat_message(
                "Maren Tallis",
                False,
                "Tea?",
                "2024-07-12T01:32:10.000Z",
                swipes=["Tea?", "Coffee?"],
                swipe_info=[
                    {"send_date": "2024-07-12T01:32:10.000Z", "extra": {"model": "gpt-4o"}},
                    {"send_date": "2024-07-12T01:33:00.000Z", "extra": {"model": "gpt-4o-mini"}},
                ],
                gen_started="2024-07-12T01:32:09.000Z",
                gen_finished="2024-07-12T01:32:10.000Z",
                extra={"api": "openai", "model": "gpt-4o", "reasoning": "Warm drink."},
            ),
            chat_message(
                "System",
                False,
                "The storm passes.",
                "2024-07-12T01:34:00.000Z",
                is_system=False,
                extra={"type": "narrator"},
            ),
            chat_message("Ada", True, "(hidden aside)", "2024-07-12T01:35:00.000Z", is_system=True),
        ),
    }
    return {
        name: content if isinstance(content, bytes) else content.encode() for name, content in files.items()
    }


def real_files() -> dict[str, bytes]:
    if not FIXTURES.exists():
        return {}
    return {f"real/{path.name}": path.read_bytes() for path in sorted(FIXTURES.iterdir()) if path.is_file()}


# --- Field-by-field difference ----------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    change: str  # "added" | "removed" | "changed"
    path: str

    def __str__(self) -> str:
        return f"{self.change} {self.path}"


def differences(before, after, path: str = "") -> list[Difference]:
    if isinstance(before, dict) and isinstance(after, dict):
        found = []
        for key in before:
            sub = f"{path}.{key}" if path else str(key)
            found += (
                differences(before[key], after[key], sub) if key in after else [Difference("removed", sub)]
            )
        found += [
            Difference("added", f"{path}.{key}" if path else str(key)) for key in after if key not in before
        ]
        return found
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            d
            for i, (b, a) in enumerate(zip(before, after, strict=True))
            for d in differences(b, a, f"{path}[{i}]")
        ]
    if before == after and (type(before) is type(after) or _numbers(before, after)):
        return []
    return [Difference("changed", path)]


def _numbers(*values) -> bool:
    """1 and 1.0 are one JSON number to SillyTavern (JavaScript has one number type)."""
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


# --- What is normalised on the way (each one is in docs/sillytavern.md, "Round trips") ---------

NORMALISATIONS: list[tuple[str, str, str]] = [
    # (file kind, difference pattern, why)
    (
        "card_v1",
        r"added .*",
        "a V1 card exports as a V3 card: its fields move into `data`, the V1 ones stay on top",
    ),
    ("card", r"changed spec(_version)?", "a JSON card exports as V3 (`chara_card_v3`, `3.0`)"),
    ("card", r"added data\.group_only_greetings", "a V3 card always has `group_only_greetings`"),
    ("png", r"added ccv3(\..*)?", "a PNG card is written with both chunks, `chara` (V2) and `ccv3` (V3)"),
    ("png", r"added chara\.data\.group_only_greetings", "a card always has `group_only_greetings`"),
    (
        "(card|png|charx)",
        r"added (chara\.|ccv3\.|card\.json\.)?(name|description|personality|scenario|first_mes|mes_example|"
        r"creatorcomment|talkativeness|fav|tags)",
        "the V1 mirror fields are always written at the top of a card, as SillyTavern writes them",
    ),
    (
        "(card|png|charx)",
        r"(added|changed) (chara\.|ccv3\.|card\.json\.)?data\.character_book"
        r"\.entries\[\d+\]\.(extensions\.\w+|use_regex)",
        "an embedded book's entries are written with every field SillyTavern writes, missing or null "
        "ones at its defaults",
    ),
    (
        "worldbook",
        r"added entries\.\d+\.\w+",
        "a World Info entry gets every field, missing ones at SillyTavern's defaults",
    ),
    (
        "chat",
        r"added line\d+\.(swipes|swipe_id|swipe_info|extra|is_system)(\[\d+\])?",
        "every message is written with its swipe fields and `extra`",
    ),
    ("chat", r"changed line\d+\.send_date", "`send_date` is written in UTC ISO form (the same moment)"),
]


def allowed(kind: str, difference: Difference) -> bool:
    return any(re.fullmatch(k, kind) and re.fullmatch(p, str(difference)) for k, p, _ in NORMALISATIONS)


# --- Import, export, compare ------------------------------------------------------------------


def chunks_of(data: bytes) -> dict:
    return {
        k: json.loads(base64.b64decode(v))
        for k, v in png.read_text_chunks(data).items()
        if k in ("chara", "ccv3")
    }


def zip_of(data: bytes) -> dict:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        out = {name: archive.read(name) for name in archive.namelist()}
    out["card.json"] = json.loads(out["card.json"])
    return {k: (v if k == "card.json" else base64.b64encode(v).decode()) for k, v in out.items()}


def lines_of(data: bytes) -> dict:
    return {f"line{i}": json.loads(line) for i, line in enumerate(data.decode().splitlines()) if line.strip()}


def round_trip(owner, name: str, content: bytes) -> tuple[str, object, object]:
    """Return (kind, before, after) for one file."""
    if name.endswith(".jsonl"):
        character = owner.characters.first()
        room, _ = chatfiles.chat_import(host=owner, character=character, content=content)
        return "chat", lines_of(content), lines_of(chat_codec.export_chat_jsonl(chatfiles.chat_file(room)))
    imported = services.import_file(owner=owner, filename=Path(name).name, content=content)
    obj = imported.obj
    if imported.kind == "card":
        if name.endswith(".png"):
            before, after = chunks_of(content), chunks_of(services.character_export(character=obj, fmt="png"))
            if "ccv3" in before:
                # ccv3 is the card; SillyTavern writes chara from the same card with the V2 spec.
                before.pop("chara")
                after.pop("chara")
            return "png", before, after
        if name.endswith(".charx"):
            return "charx", zip_of(content), zip_of(services.character_export(character=obj, fmt="charx"))
        before = json.loads(content)
        kind = "card" if before.get("spec") else "card_v1"
        return kind, before, json.loads(services.character_export(character=obj, fmt="json"))
    if imported.kind == "worldbook":
        kind = "worldbook" if imported.label.startswith("a SillyTavern") else "converted_book"
        return kind, json.loads(content), json.loads(services.worldbook_export(book=obj))
    if imported.kind == "preset":
        kind = "chat_preset" if "chat-completion" in imported.label else "text_preset"
        return kind, json.loads(content), json.loads(services.preset_export(preset=obj))
    return "template", json.loads(content), json.loads(services.template_export(template=obj))


def test_round_trips_are_exact_but_for_documented_normalisations(owner, capsys):
    files = {**corpus(), **real_files()}
    exact, normalised, unexplained, converted = [], [], {}, []
    for name, content in files.items():
        kind, before, after = round_trip(owner, name, copy.deepcopy(content))
        if kind == "converted_book":
            # Another app's lorebook exports as SillyTavern World Info: each entry keeps its text.
            texts = {entry["content"] for entry in after["entries"].values()}
            wanted = before.get("entries") or before.get("data")
            assert all((e.get("text") or e.get("entry") or e.get("content")) in texts for e in wanted), name
        if kind == "converted_book":
            converted.append(name)
            continue
        found = differences(before, after)
        if kind == "text_preset" and not found and json.dumps(before) != json.dumps(after):
            # A text-completion preset comes back as it came: its keys in order, 1 still 1 (not 1.0).
            found = [Difference("changed", "the file's key order or number types")]
        left = [d for d in found if not allowed(kind, d)]
        if left:
            unexplained[name] = [str(d) for d in left]
        elif found:
            normalised.append(name)
        else:
            exact.append(name)
    with capsys.disabled():
        print(
            f"\nround trips: {len(exact)} exact, {len(normalised)} with documented normalisations, "
            f"{len(unexplained)} with other differences, {len(converted)} converted to another format, "
            f"of {len(files)} files"
        )
        for name, found in unexplained.items():
            print(f"  {name}: {', '.join(found)}")
    assert unexplained == {}
