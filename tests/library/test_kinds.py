"""Every kind of SillyTavern file is recognised on upload: imported as what it is, or refused by name."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from orbchat.library.models import Character, ContextTemplate, InstructTemplate, Preset, SystemPrompt

pytestmark = pytest.mark.django_db

INSTRUCT = {
    "name": "Bracket Chat",
    "input_sequence": "[USER]",
    "output_sequence": "[BOT]",
    "system_sequence": "[SYS]",
    "stop_sequence": "[END]",
    "wrap": True,
    "macro": True,
    "names_behavior": "force",
    "a_field_orbchat_does_not_use": [1, 2],
}
CONTEXT = {
    "name": "Plain Story",
    "story_string": "{{#if description}}{{description}}\n{{/if}}",
    "example_separator": "***",
    "chat_start": "--- chat ---",
    "use_stop_strings": False,
}
SYSTEM_PROMPT = {"name": "Narrator", "content": "You narrate {{char}}'s world for {{user}}."}
KOBOLD = {"temp": 0.8, "rep_pen": 1.1, "rep_pen_slope": 0.7, "tfs": 1, "typical": 1, "sampler_order": [6, 0]}
TEXTGEN = {"temp": 0.7, "rep_pen": 1.2, "typical_p": 1, "mirostat_mode": 0, "temperature_last": True}
NOVELAI = {"temperature": 1.1, "max_length": 150, "repetition_penalty": 1.6, "tail_free_sampling": 0.9}
NOVELAI_BOOK = {
    "lorebookVersion": 5,
    "entries": [
        {
            "text": "The Glass Sea is frozen light.",
            "displayName": "Glass Sea",
            "keys": ["glass sea"],
            "enabled": True,
            "contextConfig": {"budgetPriority": 400},
        }
    ],
}
AGNAI_BOOK = {
    "kind": "memory",
    "name": "Harbour notes",
    "entries": [
        {
            "name": "Lighthouse",
            "entry": "The lighthouse keeper is blind.",
            "keywords": ["lighthouse"],
            "weight": 7,
            "enabled": True,
        }
    ],  # noqa: E501
}
RISU_BOOK = {
    "type": "risu",
    "ver": 1,
    "data": [
        {
            "key": "bell, bells",
            "secondkey": "",
            "comment": "Bells",
            "content": "The bells ring at noon.",
            "alwaysActive": False,
            "selective": False,
            "insertorder": 50,
            "mode": "normal",
        }
    ],
}
LOREBOOK_V3 = {
    "spec": "lorebook_v3",
    "data": {
        "name": "Tidebook",
        "entries": [{"keys": ["tide"], "content": "The tide is red.", "enabled": True, "insertion_order": 3}],
    },
}
CHAT = "\n".join(
    json.dumps(line)
    for line in (
        {
            "user_name": "You",
            "character_name": "Mira",
            "create_date": "2024-7-12@01h31m37s",
            "chat_metadata": {},
        },
        {"name": "Mira", "is_user": False, "send_date": "2024-7-12@01h31m37s", "mes": "Hello."},
    )
)


def upload(client, name: str, content: bytes | str | dict) -> str:
    if isinstance(content, dict):
        content = json.dumps(content)
    if isinstance(content, str):
        content = content.encode()
    response = client.post(reverse("library:import"), {"files": [SimpleUploadedFile(name, content)]})
    assert response.status_code == 200
    text = re.sub(r"<[^>]+>", "", response.content.decode())  # what a person reads
    return html.unescape(re.sub(r"\s+", " ", text))


@pytest.mark.parametrize(
    ("data", "model", "seen"),
    [
        (INSTRUCT, InstructTemplate, "Imported a SillyTavern instruct template: Bracket Chat"),
        (CONTEXT, ContextTemplate, "Imported a SillyTavern context template: Plain Story"),
        (SYSTEM_PROMPT, SystemPrompt, "Imported a SillyTavern system prompt: Narrator"),
    ],
)
def test_templates_are_stored_as_what_they_are_and_export_as_they_came(signed_in, owner, data, model, seen):
    characters = Character.objects.count()
    page = upload(signed_in, "file.json", data)
    assert seen in page
    assert Character.objects.count() == characters
    template = model.objects.get(owner=owner)
    listing = signed_in.get(reverse("library:templates")).content.decode()
    assert html.escape(template.name) in listing
    kind = {InstructTemplate: "instruct", ContextTemplate: "context", SystemPrompt: "system_prompt"}[model]
    exported = signed_in.get(reverse("library:template_export", args=[kind, template.pk]))
    assert json.loads(exported.content) == data


@pytest.mark.parametrize(
    ("data", "seen", "temperature"),
    [
        (KOBOLD, "Imported a text-completion preset (KoboldAI): kobold", 0.8),
        (TEXTGEN, "Imported a text-completion preset (TextGen): textgen", 0.7),
        (NOVELAI, "Imported a text-completion preset (NovelAI): novelai", 1.1),
    ],
)
def test_text_completion_presets_import_their_samplers(signed_in, owner, data, seen, temperature):
    characters = Character.objects.count()
    name = seen.rsplit(": ", 1)[1]
    page = upload(signed_in, f"{name}.json", data)
    assert seen in page
    assert "the prompt sections are OrbChat's default" in page
    assert Character.objects.count() == characters
    assert Preset.objects.get(owner=owner, name=name).temperature == temperature


def test_a_novelai_preset_maps_its_generation_length(owner, signed_in):
    upload(signed_in, "nai.json", NOVELAI)
    preset = Preset.objects.get(owner=owner, name="nai")
    assert (preset.max_tokens, preset.repetition_penalty) == (150, 1.6)


@pytest.mark.parametrize(
    ("data", "seen", "name", "content"),
    [
        (NOVELAI_BOOK, "Imported a NovelAI lorebook: glass", "glass", "The Glass Sea is frozen light."),
        (AGNAI_BOOK, "Imported an Agnai memory book: harbour", "harbour", "The lighthouse keeper is blind."),
        (RISU_BOOK, "Imported a RisuAI lorebook: bells", "bells", "The bells ring at noon."),
        (
            LOREBOOK_V3,
            "Imported a Character Card V3 lorebook (lorebook_v3): tide",
            "tide",
            "The tide is red.",
        ),
    ],
)
def test_other_apps_world_books_import_with_their_content(signed_in, owner, data, seen, name, content):
    characters = Character.objects.count()
    page = upload(signed_in, f"{name}.json", data)
    assert seen in page
    assert Character.objects.count() == characters
    book = owner.world_books.get(name=name)
    assert [entry.content for entry in book.entries.all()] == [content]


def test_world_book_entries_keep_their_keys_and_order(owner, signed_in):
    upload(signed_in, "bells.json", RISU_BOOK)
    upload(signed_in, "glass.json", NOVELAI_BOOK)
    bells = owner.world_books.get(name="bells").entries.get()
    glass = owner.world_books.get(name="glass").entries.get()
    assert (bells.keys, bells.order, bells.comment) == (["bell", "bells"], 50, "Bells")
    assert (glass.keys, glass.order, glass.comment) == (["glass sea"], 400, "Glass Sea")


@pytest.mark.parametrize(
    ("name", "content", "seen"),
    [
        ("chat.jsonl", CHAT, "a SillyTavern chat: import chats onto a character from the Chats page"),
        ("chat.json", CHAT, "a SillyTavern chat: import chats onto a character from the Chats page"),
        (
            "qr.json",
            {"name": "Default", "quickReplyEnabled": True, "quickReplySlots": []},
            "this looks like a SillyTavern Quick Reply set, which OrbChat does not import",
        ),
        (
            "theme.json",
            {"name": "Azure", "blur_strength": 11, "main_text_color": "rgba(1, 2, 3, 1)"},
            "this looks like a SillyTavern UI theme, which OrbChat does not import",
        ),
        (
            "name-only.json",
            {"name": "Nobody", "colour": "blue"},
            'not a file OrbChat can import: a JSON object with the fields "colour", "name"',
        ),
    ],
)
def test_files_that_are_no_importable_kind_are_refused_by_what_they_are(signed_in, name, content, seen):
    counts = Character.objects.count(), Preset.objects.count()
    page = upload(signed_in, name, content)
    assert f"Refused: {name}: {seen}" in page
    assert (Character.objects.count(), Preset.objects.count()) == counts


def test_a_card_json_is_still_a_character(signed_in, owner):
    page = upload(
        signed_in, "mira.json", {"name": "Mira", "description": "A cartographer.", "first_mes": "Hi"}
    )
    assert "Imported a character card: Mira" in page
    assert owner.characters.filter(name="Mira").exists()
