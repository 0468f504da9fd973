from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from orbchat.interop import presets as preset_codec
from orbchat.library import services
from orbchat.library.presets import MARKERS

pytestmark = pytest.mark.django_db


def test_the_default_preset_has_every_marker_including_memory(owner):
    preset = owner.presets.get()
    markers = {s["marker"] for s in preset.sections if s["kind"] == "marker"}
    assert set(MARKERS) - {"main_prompt"} <= markers
    assert preset.memory_template == "Past events:\n{{memory}}"


def test_sillytavern_chat_preset_imports_with_markers_mapped(owner, fixture_file):
    imported = services.import_file(
        owner=owner, filename="Default.json", content=fixture_file("openai_preset_default.json")
    )
    preset = imported.obj
    markers = [s["marker"] for s in preset.sections if s["kind"] == "marker"]
    assert "chat_history" in markers and "char_description" in markers
    assert preset.temperature == json.loads(fixture_file("openai_preset_default.json"))["temperature"]
    exported = json.loads(services.preset_export(preset=preset))
    original = preset_codec.parse_chat_completion_preset(
        json.loads(fixture_file("openai_preset_default.json"))
    )[0]
    assert preset_codec.parse_chat_completion_preset(exported)[0]["sections"] == original["sections"]


def test_text_completion_preset_imports_samplers_and_reports_the_rest(owner, fixture_file):
    imported = services.import_file(
        owner=owner, filename="tg.json", content=fixture_file("textgen_preset_default.json")
    )
    assert imported.kind == "preset"
    assert imported.unmapped  # named, not silently dropped
    raw = json.loads(fixture_file("textgen_preset_default.json"))
    assert imported.obj.temperature == raw["temp"]


def test_moving_a_section_changes_the_order(signed_in, owner):
    preset = owner.presets.get()
    names = [s["name"] for s in preset.sections]
    target = preset.sections[3]["identifier"]
    signed_in.post(reverse("library:preset_section_move", args=[preset.pk, target]), {"direction": "up"})
    preset.refresh_from_db()
    assert [s["name"] for s in preset.sections] == names[:2] + [names[3], names[2]] + names[4:]


def test_editing_a_literal_section(signed_in, owner):
    preset = owner.presets.get()
    main = preset.sections[0]
    signed_in.post(
        reverse("library:preset_section", args=[preset.pk, main["identifier"]]),
        {
            "name": "Main",
            "role": "system",
            "text": "Be {{char}}.",
            "enabled": "on",
            "injection": "relative",
            "depth": 4,
        },
    )
    preset.refresh_from_db()
    assert preset.sections[0]["text"] == "Be {{char}}."


def test_sampler_settings_are_validated(signed_in, owner):
    preset = owner.presets.get()
    response = signed_in.post(
        reverse("library:preset", args=[preset.pk]),
        {
            "name": "P",
            "temperature": "9",
            "top_p": 1,
            "top_k": 0,
            "min_p": 0,
            "frequency_penalty": 0,
            "presence_penalty": 0,
            "repetition_penalty": 1,
            "max_tokens": 300,
            "memory_template": "{{memory}}",
        },
    )
    assert "less than or equal to 2" in response.content.decode()
    preset.refresh_from_db()
    assert preset.name != "P"


def test_importing_a_chat_preset_reports_the_sections_it_added(signed_in, owner, fixture_file):
    content = fixture_file("openai_preset_default.json")
    page = signed_in.post(
        reverse("library:import"), {"files": [SimpleUploadedFile("Default.json", content)]}
    ).content.decode()
    assert "Added Memory (after the chat history): the file has no place for it" in page
    assert "Added Author&#x27;s note (in the chat history at the author&#x27;s note&#x27;s own depth" in page
    preset = owner.presets.get(name="Default")
    assert json.loads(services.preset_export(preset=preset)) == json.loads(content)


# --- Export gives back what was imported ------------------------------------------------------

TEXTGEN = {"temp": 0.7, "top_p": 0.5, "top_k": 40, "tfs": 1, "typical_p": 1, "rep_pen": 1.2,
           "rep_pen_range": 0, "freq_pen": 0, "presence_pen": 0, "seed": -1, "dry_multiplier": 0,
           "sampler_priority": ["temperature", "top_k", "top_p"]}  # fmt: skip
KOBOLD = {"temp": 1, "rep_pen": 1.1, "rep_pen_range": 1024, "top_p": 0.5, "top_a": 0.75, "top_k": 0,
          "typical": 0.19, "tfs": 0.97, "rep_pen_slope": 0.7, "sampler_order": [6, 5, 4, 3, 2, 1, 0],
          "mirostat": 0}  # fmt: skip
NOVELAI = {"max_context": 8000, "temperature": 1, "max_length": 150, "min_length": 1, "top_p": 0.995,
           "tail_free_sampling": 0.87, "repetition_penalty": 1.5, "phrase_rep_pen": "light"}  # fmt: skip
CHAT = {
    "temperature": 1,
    "openai_max_tokens": 300,
    "stream_openai": True,
    "prompts": [
        {"identifier": "main", "name": "Main Prompt", "system_prompt": True, "content": "Write {{char}}."},
        {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True},
    ],
    "prompt_order": [
        {
            "character_id": 100001,
            "order": [
                {"identifier": "main", "enabled": True},
                {"identifier": "chatHistory", "enabled": True},
            ],
        }
    ],
}


def import_preset(owner, raw: dict, filename: str = "p.json"):
    return services.import_file(owner=owner, filename=filename, content=json.dumps(raw).encode()).obj


def exported_text(preset) -> str:
    """The exported file, re-serialised: the same text means the same keys, order, values and types."""
    return json.dumps(json.loads(services.preset_export(preset=preset)))


def save_form(client, preset, **changes) -> None:
    """Save the preset's settings form as the page shows them, with `changes` typed in."""
    values = {name: getattr(preset, name) for name in (*services.SAMPLER_FIELDS, "name", "memory_template")}
    values.update(changes)
    data = {
        k: "" if v is None else "\n".join(v) if isinstance(v, list) else str(v) for k, v in values.items()
    }
    response = client.post(reverse("library:preset", args=[preset.pk]), data)
    assert response.status_code == 302, response.content.decode()
    preset.refresh_from_db()


@pytest.mark.parametrize("raw", [TEXTGEN, KOBOLD, NOVELAI], ids=["textgen", "kobold", "novelai"])
def test_a_text_completion_preset_exports_exactly_as_imported(signed_in, owner, raw):
    preset = import_preset(owner, raw)
    assert exported_text(preset) == json.dumps(raw)
    save_form(signed_in, preset)  # saving without a change changes nothing
    assert exported_text(preset) == json.dumps(raw)


@pytest.mark.parametrize(
    ("raw", "changes", "written"),
    [
        (TEXTGEN, {"temperature": 1.1, "repetition_penalty": 1.05}, {"temp": 1.1, "rep_pen": 1.05}),
        (KOBOLD, {"temperature": 2, "max_tokens": 300}, {"temp": 2, "genamt": 300}),
        (NOVELAI, {"max_tokens": 200}, {"max_length": 200}),
    ],
    ids=["textgen", "kobold", "novelai"],
)
def test_a_changed_sampler_is_exported_under_the_files_name(signed_in, owner, raw, changes, written):
    preset = import_preset(owner, raw)
    save_form(signed_in, preset, **changes)
    assert exported_text(preset) == json.dumps({**raw, **written})


def test_a_chat_completion_preset_exports_no_sampler_it_did_not_have(signed_in, owner):
    preset = import_preset(owner, CHAT)
    assert exported_text(preset) == json.dumps(CHAT)  # `1` stays `1`, and nothing is added
    save_form(signed_in, preset, top_k=40)
    assert json.loads(services.preset_export(preset=preset)) == {**CHAT, "top_k": 40}


def test_a_preset_made_in_orbchat_exports_as_a_chat_completion_preset_with_its_samplers(owner):
    exported = json.loads(services.preset_export(preset=owner.presets.get()))
    assert (exported["temperature"], exported["top_p"], exported["openai_max_tokens"]) == (0.9, 0.95, 400)
    assert exported["prompts"] and exported["prompt_order"]


def test_a_copy_of_an_imported_text_preset_exports_as_the_file(owner):
    preset = services.preset_duplicate(preset=import_preset(owner, KOBOLD))
    assert exported_text(preset) == json.dumps(KOBOLD)
