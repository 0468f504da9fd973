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
