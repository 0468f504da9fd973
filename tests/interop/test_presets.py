from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from orbchat.interop import presets
from orbchat.interop.errors import InteropError

FIXTURES = Path("/work/shared/fixtures/sillytavern")
SECTION_KEYS = (
    "identifier",
    "kind",
    "marker",
    "name",
    "role",
    "text",
    "enabled",
    "injection",
    "depth",
    "forbid_overrides",
)


def fixture(name: str) -> bytes:
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"the SillyTavern fixture {name} is not available")
    return path.read_bytes()


def prompt(identifier: str, **fields) -> dict:
    return {"identifier": identifier, "name": identifier.title(), **fields}


def order(character_id: int, *identifiers: str, disabled: tuple[str, ...] = ()) -> dict:
    items = [{"identifier": i, "enabled": i not in disabled} for i in identifiers]
    return {"character_id": character_id, "order": items}


def our_sections() -> list[dict]:
    """Sections as OrbChat's default preset builds them, including markers SillyTavern lacks."""

    def section(kind, name, marker=None, identifier=None, **fields):
        return {
            "identifier": identifier or marker,
            "kind": kind,
            "marker": marker,
            "name": name,
            "role": "system",
            "text": "",
            "enabled": True,
            "injection": "relative",
            "depth": 4,
            "forbid_overrides": False,
            **fields,
        }

    return [
        section("literal", "Main prompt", identifier="main", text="Be {{char}}."),
        section("marker", "World info (before)", "world_info_before"),
        section("marker", "Persona", "persona"),
        section("marker", "Character description", "char_description"),
        section("marker", "Memory", "memory", enabled=False),
        section("marker", "Chat history", "chat_history"),
        section("marker", "Author's note", "authors_note", injection="depth", depth=2, role="user"),
        section("literal", "Nudge", identifier="a1b2c3", text="Stay brief.", role="assistant"),
        section("literal", "Post-history instructions", identifier="jailbreak", text="Continue."),
        section("marker", "Post-history instructions", "post_history"),
    ]


# --- Chat-completion presets --------------------------------------------------------------------


def test_the_default_openai_preset_maps_markers_in_the_global_order():
    preset, unmapped = presets.parse_chat_completion_preset(
        fixture("openai_preset_default.json"), name="Default"
    )
    assert preset["name"] == "Default"
    sections = [s for s in preset["sections"] if not s.get("added")]
    assert all(tuple(s) == SECTION_KEYS for s in sections)
    assert [(s["identifier"], s["marker"]) for s in sections] == [
        ("main", None),
        ("worldInfoBefore", "world_info_before"),
        ("personaDescription", "persona"),
        ("charDescription", "char_description"),
        ("charPersonality", "char_personality"),
        ("scenario", "scenario"),
        ("enhanceDefinitions", None),
        ("nsfw", None),
        ("worldInfoAfter", "world_info_after"),
        ("dialogueExamples", "example_dialogue"),
        ("chatHistory", "chat_history"),
        ("jailbreak", "post_history"),
    ]
    main = sections[0]
    assert main["kind"] == "literal"
    assert main["name"] == "Main Prompt"
    assert main["text"] == "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
    jailbreak = sections[-1]
    assert jailbreak["kind"] == "marker"
    assert jailbreak["name"] == "Post-History Instructions"
    assert jailbreak["role"] == "system"
    assert [s["name"] for s in sections if not s["enabled"]] == ["Enhance Definitions"]
    assert all(s["kind"] == "marker" and s["text"] == "" for s in sections if s["marker"])
    added = [(s["marker"], s["enabled"]) for s in preset["sections"] if s.get("added")]
    assert added == [("memory", True), ("authors_note", True)]


def test_the_default_openai_preset_samplers_and_unmapped_settings():
    preset, unmapped = presets.parse_chat_completion_preset(fixture("openai_preset_default.json"))
    assert preset["samplers"] == {
        "temperature": 1.0,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "context_size": 4095,
        "max_tokens": 300,
        "seed": None,
    }
    assert 'setting "stream_openai"' in unmapped
    assert 'setting "top_a"' in unmapped
    assert not any("prompts" in name or "prompt_order" in name for name in unmapped)
    assert preset["extra"]["stream_openai"] is True
    assert preset["extra"]["wi_format"] == "{0}"
    assert len(preset["extra"]) == len(unmapped) + 2  # and the file's own prompts and prompt_order


def test_the_default_openai_preset_round_trips():
    raw = json.loads(fixture("openai_preset_default.json"))
    preset, _ = presets.parse_chat_completion_preset(raw, name="Default")
    exported = presets.export_chat_completion_preset(preset)
    assert presets.parse_chat_completion_preset(exported, name="Default")[0] == preset
    assert exported == raw


def test_order_100001_wins_then_100000_then_the_longest():
    prompts = [prompt("main", content="m"), {"identifier": "chatHistory", "marker": True}, prompt("nsfw")]
    both = {"prompts": prompts, "prompt_order": [order(100000, "main"), order(100001, "chatHistory", "main")]}
    sections = presets.parse_chat_completion_preset(both)[0]["sections"]
    assert [(s["identifier"], s["enabled"]) for s in sections if not s.get("added")] == [
        ("chatHistory", True),
        ("main", True),
        ("nsfw", False),
    ]
    legacy = {"prompts": prompts, "prompt_order": [order(7, "nsfw"), order(100000, "main", "nsfw")]}
    sections = presets.parse_chat_completion_preset(legacy)[0]["sections"]
    assert [s["identifier"] for s in sections if not s.get("added")][:2] == [
        "main",
        "nsfw",
    ]
    others = {"prompts": prompts, "prompt_order": [order(3, "nsfw"), order(4, "chatHistory", "nsfw")]}
    sections = presets.parse_chat_completion_preset(others)[0]["sections"]
    assert [s["identifier"] for s in sections if not s.get("added")][:2] == [
        "chatHistory",
        "nsfw",
    ]


def test_without_prompt_order_the_prompts_order_is_used():
    raw = {"prompts": [prompt("b", content="B", enabled=False), prompt("a", content="A")]}
    preset, _ = presets.parse_chat_completion_preset(raw)
    assert [(s["identifier"], s["enabled"], s["text"]) for s in preset["sections"] if not s.get("added")] == [
        ("b", False, "B"),
        ("a", True, "A"),
    ]


def test_injection_at_depth_and_roles():
    raw = {
        "prompts": [
            prompt("note", content="N", role="user", injection_position=1, injection_depth=3),
            prompt("odd", content="O", role="narrator", injection_position=0, injection_depth=9),
        ]
    }
    note, odd = [s for s in presets.parse_chat_completion_preset(raw)[0]["sections"] if not s.get("added")]
    assert (note["injection"], note["depth"], note["role"]) == ("depth", 3, "user")
    assert (odd["injection"], odd["depth"], odd["role"]) == ("relative", 9, "system")


def test_unknown_markers_and_undefined_prompts_are_reported_not_imported():
    raw = {
        "prompts": [
            prompt("main", content="m"),
            {"identifier": "bias", "name": "Bias", "marker": True},
            "junk",
        ],
        "prompt_order": [order(100001, "main", "bias", "ghost")],
    }
    preset, unmapped = presets.parse_chat_completion_preset(raw)
    assert [s["identifier"] for s in preset["sections"] if not s.get("added")] == ["main"]
    exported = presets.export_chat_completion_preset(preset)
    assert exported["prompts"] == raw["prompts"]  # what OrbChat does not use goes back out as it came
    assert exported["prompt_order"] == raw["prompt_order"]
    assert unmapped == [
        "prompt 3 (it has no identifier)",
        'prompt "Bias" (marker bias)',
        'prompt "ghost" (in the order but not defined)',
    ]


def test_builtin_prompts_missing_from_prompts_still_import():
    raw = {"prompts": [], "prompt_order": [order(100001, "main", "chatHistory", "jailbreak")]}
    sections = presets.parse_chat_completion_preset(raw)[0]["sections"]
    assert [(s["kind"], s["name"], s["text"]) for s in sections] == [
        ("literal", "Main Prompt", ""),
        ("marker", "Chat History", ""),
        ("marker", "Memory", ""),
        ("marker", "Author's note", ""),
        ("marker", "Post-History Instructions", ""),
    ]


def test_invalid_sampler_values_are_kept_and_reported():
    raw = {"temperature": "hot", "top_k": "40", "seed": 1234, "openai_max_context": None, "prompts": []}
    preset, unmapped = presets.parse_chat_completion_preset(raw)
    assert preset["samplers"] == {"top_k": 40, "seed": 1234}
    assert preset["extra"] == {"temperature": "hot", "openai_max_context": None, "prompts": []}
    assert unmapped == ['setting "temperature"', 'setting "openai_max_context"']
    exported = presets.export_chat_completion_preset(preset)
    assert {key: exported[key] for key in raw} == raw  # each value as the file wrote it


def test_every_prompt_field_round_trips_and_edits_change_only_what_was_edited():
    raw = {
        "temperature": 0.8,
        "prompts": [
            prompt("main", content="M", system_prompt=True, forbid_overrides=True, injection_order=50),
            prompt("hint", content="H", role="user", injection_position=1, injection_depth=2,
                   injection_order=120, injection_trigger=["continue"], enabled=False, future={"x": 1}),
            {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True},
            prompt("jailbreak", content="J", system_prompt=True),
        ],
        "prompt_order": [
            order(100000, "main"),
            order(100001, "main", "hint", "chatHistory", "jailbreak", disabled=("hint",)),
        ],
    }  # fmt: skip
    preset, _ = presets.parse_chat_completion_preset(raw)
    by_id = {s["identifier"]: s for s in preset["sections"]}
    assert by_id["main"]["forbid_overrides"] is True
    assert (by_id["hint"]["enabled"], by_id["hint"]["injection"], by_id["hint"]["depth"]) == (
        False,
        "depth",
        2,
    )
    assert presets.export_chat_completion_preset(preset) == raw

    by_id["hint"].update(text="H2", enabled=True)
    edited = presets.export_chat_completion_preset(preset)
    assert edited["prompts"][1] == {**raw["prompts"][1], "content": "H2"}
    assert edited["prompt_order"][1]["order"][1] == {"identifier": "hint", "enabled": True}
    assert edited["prompt_order"][0] == raw["prompt_order"][0]


def test_chat_preset_refusals():
    with pytest.raises(InteropError, match=re.escape("the preset's JSON is invalid: ")):
        presets.parse_chat_completion_preset(b'{"prompts": [}')
    with pytest.raises(InteropError, match="the preset's JSON is not an object"):
        presets.parse_chat_completion_preset("[]")
    with pytest.raises(InteropError, match="the preset's 'prompts' is not a list"):
        presets.parse_chat_completion_preset({"prompts": {"main": {}}})
    with pytest.raises(InteropError, match="larger than 1 KB"):
        presets.parse_chat_completion_preset(json.dumps({"x": "y" * 2000}), max_bytes=1024)


def test_our_own_sections_survive_export_and_import():
    preset = {
        "name": "Ours",
        "sections": our_sections(),
        "samplers": {
            "temperature": 0.9,
            "max_tokens": 400,
            "context_size": None,
            "stop": ["\n\n"],
            "seed": None,
        },
        "extra": {"custom_setting": {"a": 1}},
    }
    exported = presets.export_chat_completion_preset(preset)
    assert exported["custom_setting"] == {"a": 1}
    assert exported["seed"] == -1
    assert "openai_max_context" not in exported
    by_id = {p["identifier"]: p for p in exported["prompts"]}
    assert set(by_id) == {
        "main",
        "worldInfoBefore",
        "personaDescription",
        "charDescription",
        "memory",
        "chatHistory",
        "authors_note",
        "a1b2c3",
        "jailbreak",
        "post_history",
    }
    assert by_id["a1b2c3"]["system_prompt"] is False
    assert by_id["authors_note"] == {
        "identifier": "authors_note",
        "name": "Author's note",
        "system_prompt": True,
        "marker": True,
        "role": "user",
        "injection_position": 1,
        "injection_depth": 2,
    }

    imported, unmapped = presets.parse_chat_completion_preset(exported, name="Ours")
    assert unmapped == ['setting "custom_setting"']
    for before, after in zip(preset["sections"], imported["sections"], strict=True):
        if before["kind"] == "marker":
            # Markers SillyTavern knows take its identifiers; the rest keep ours.
            after = {**after, "identifier": before["identifier"]}
        assert after == before
    assert imported["samplers"] == {"temperature": 0.9, "max_tokens": 400, "seed": None}
    again = presets.parse_chat_completion_preset(presets.export_chat_completion_preset(imported), name="Ours")
    assert again == (imported, unmapped)


def test_export_keeps_identifiers_unique_and_literal():
    sections = [
        {"identifier": "x", "kind": "literal", "name": "One", "text": "1"},
        {"identifier": "x", "kind": "literal", "name": "Two", "text": "2"},
        {"identifier": "scenario", "kind": "literal", "name": "Not the marker", "text": "3"},
        {"identifier": "", "kind": "literal", "name": "Nameless", "text": "4"},
        {"identifier": "s1", "kind": "marker", "marker": "scenario", "name": "Scenario"},
        {"identifier": "s2", "kind": "marker", "marker": "scenario", "name": "Scenario again"},
        {"identifier": "s3", "kind": "marker", "marker": "not_ours", "name": "Unknown"},
    ]
    exported = presets.export_chat_completion_preset({"sections": sections})
    assert [p["identifier"] for p in exported["prompts"]] == [
        "x",
        "x_2",
        "scenario_2",
        "custom_3",
        "scenario",
    ]
    imported = presets.parse_chat_completion_preset(exported)[0]["sections"]
    kinds = [s["kind"] for s in imported if not s.get("added")]
    assert kinds == ["literal", "literal", "literal", "literal", "marker"]


# --- Text-completion presets --------------------------------------------------------------------


def test_the_default_textgen_preset_maps_samplers_and_reports_the_rest():
    raw = json.loads(fixture("textgen_preset_default.json"))
    preset, unmapped = presets.parse_text_completion_preset(json.dumps(raw), name="Default")
    assert preset["name"] == "Default"
    assert preset["sections"] == []
    assert preset["samplers"] == {
        "temperature": 0.7,
        "top_p": 0.5,
        "top_k": 40,
        "min_p": 0.0,
        "repetition_penalty": 1.2,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
    }
    for name in ("rep_pen_range", "tfs", "typical_p", "mirostat_mode", "sampler_order", "dry_base"):
        assert f'setting "{name}"' in unmapped
    assert 'setting "temp"' not in unmapped
    assert len(unmapped) == len(raw) - 7
    assert preset["extra"]["sampler_priority"] == raw["sampler_priority"]


def test_text_preset_generation_length_and_seed():
    preset, unmapped = presets.parse_text_completion_preset({"temp": 1, "genamt": 250, "seed": -1, "tfs": 1})
    assert preset["samplers"] == {"temperature": 1.0, "max_tokens": 250, "seed": None}
    assert unmapped == ['setting "tfs"']


# --- Text-completion presets export in their own format -----------------------------------------

# Small files in each dialect, written as SillyTavern's own default presets are (default/content/presets).
TEXTGEN = {"temp": 0.7, "temperature_last": True, "top_p": 0.5, "top_k": 40, "tfs": 1, "rep_pen": 1.2,
           "rep_pen_range": 0, "freq_pen": 0, "presence_pen": 0, "genamt": 250, "seed": -1,
           "sampler_priority": ["temperature", "top_k", "top_p"], "json_schema": {}}  # fmt: skip
KOBOLD = {"temp": 1, "rep_pen": 1.1, "rep_pen_range": 1024, "top_p": 0.5, "top_a": 0.75, "top_k": 0,
          "typical": 0.19, "tfs": 0.97, "rep_pen_slope": 0.7, "sampler_order": [6, 5, 4, 3, 2, 1, 0],
          "mirostat": 0, "grammar": ""}  # fmt: skip
NOVELAI = {"max_context": 8000, "temperature": 1, "max_length": 150, "min_length": 1, "top_k": 0,
           "top_p": 0.995, "tail_free_sampling": 0.87, "repetition_penalty": 1.5,
           "phrase_rep_pen": "light", "order": [9, 2]}  # fmt: skip
DIALECTS = [("textgen", TEXTGEN), ("kobold", KOBOLD), ("novelai", NOVELAI)]


def same_json(a, b) -> bool:
    """The same keys in the same order with the same values and JSON types (1 is not 1.0)."""
    return json.dumps(a) == json.dumps(b)


@pytest.mark.parametrize(("dialect", "raw"), DIALECTS)
def test_a_text_completion_preset_exports_as_the_file_it_was(dialect, raw):
    preset, _ = presets.parse_text_completion_preset(copy.deepcopy(raw), dialect=dialect)
    exported = presets.export_preset(preset)
    assert same_json(exported, raw)
    assert "prompts" not in exported and "prompt_order" not in exported


@pytest.mark.parametrize(
    ("dialect", "raw", "changes", "written"),
    [
        ("textgen", TEXTGEN, {"temperature": 1.3, "max_tokens": 300}, {"temp": 1.3, "genamt": 300}),
        ("kobold", KOBOLD, {"temperature": 2.0, "repetition_penalty": 1.25}, {"temp": 2, "rep_pen": 1.25}),
        ("novelai", NOVELAI, {"max_tokens": 200, "context_size": 4096},
         {"max_length": 200, "max_context": 4096}),
    ],
)  # fmt: skip
def test_a_sampler_changed_in_orbchat_is_written_under_the_files_own_name(dialect, raw, changes, written):
    preset, _ = presets.parse_text_completion_preset(copy.deepcopy(raw), dialect=dialect)
    preset["samplers"].update(changes)
    assert same_json(presets.export_preset(preset), {**raw, **written})


def test_a_sampler_the_text_preset_did_not_set_is_written_only_once_changed():
    raw = {"temp": 0.7, "rep_pen": 1.1, "typical_p": 1}
    preset, _ = presets.parse_text_completion_preset(copy.deepcopy(raw), dialect="textgen")
    preset["source"]["imported"] = {**preset["samplers"], "top_k": 0, "context_size": None}
    preset["samplers"].update(top_k=0, context_size=None)
    assert same_json(presets.export_preset(preset), raw)
    preset["samplers"].update(top_k=50, context_size=8192)  # TextGen presets have no context size
    assert same_json(presets.export_preset(preset), {**raw, "top_k": 50})


def test_a_chat_completion_preset_gets_no_sampler_it_did_not_have():
    raw = {
        "temperature": 1,
        "openai_max_tokens": 300,
        "stream_openai": True,
        "prompts": [prompt("main", content="M", system_prompt=True)],
        "prompt_order": [order(100001, "main")],
    }
    preset, _ = presets.parse_chat_completion_preset(copy.deepcopy(raw))
    assert same_json(presets.export_chat_completion_preset(preset), raw)
    preset["samplers"]["top_p"] = 0.9
    assert presets.export_chat_completion_preset(preset) == {**raw, "top_p": 0.9}


def test_a_preset_made_in_orbchat_exports_every_sampler_as_a_chat_completion_preset():
    samplers = {"temperature": 0.9, "top_k": 0, "max_tokens": 400, "context_size": None, "seed": None}
    exported = presets.export_preset({"sections": [], "samplers": samplers})
    assert {k: exported[k] for k in ("temperature", "top_k", "openai_max_tokens", "seed")} == {
        "temperature": 0.9,
        "top_k": 0,
        "openai_max_tokens": 400,
        "seed": -1,
    }
    assert "openai_max_context" not in exported and "prompt_order" in exported


def test_a_sampler_the_file_wrote_as_null_comes_back_null():
    raw = {"temp": 0.7, "seed": None, "genamt": None}
    preset, _ = presets.parse_text_completion_preset(copy.deepcopy(raw), dialect="textgen")
    assert same_json(presets.export_preset(preset), raw)
