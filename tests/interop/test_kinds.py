from __future__ import annotations

import json
from pathlib import Path

import pytest

from orbchat.interop import kinds

FIXTURES = Path("/work/shared/fixtures/sillytavern")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("eldoria_full.json", kinds.WORLD_INFO),
        ("eldoria_minimal.json", kinds.WORLD_INFO),
        ("openai_preset_default.json", kinds.CHAT_PRESET),
        ("textgen_preset_default.json", kinds.TEXTGEN_PRESET),
    ],
)
def test_the_fixtures_are_classified(name, kind):
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"the SillyTavern fixture {name} is not available")
    assert kinds.classify(json.loads(path.read_bytes())) == kind


@pytest.mark.parametrize(
    ("obj", "kind"),
    [
        ({"spec": "chara_card_v3", "data": {}}, kinds.CARD),
        ({"data": {"name": "Mira"}}, kinds.CARD),
        ({"char_name": "Mira", "char_persona": "x"}, kinds.CARD),
        ({"spec": "lorebook_v3", "data": {"entries": []}}, kinds.LOREBOOK_V3),
        ({"entries": {}, "name": "Book"}, kinds.WORLD_INFO),
        ({"input_sequence": "", "output_sequence": "", "name": "I"}, kinds.INSTRUCT),
        ({"story_string": "", "name": "C"}, kinds.CONTEXT),
        ({"name": "S", "content": "Be kind.", "post_history": ""}, kinds.SYSTEM_PROMPT),
        ({"name": "Mira"}, None),
        ({"name": "S", "content": "x", "tags": []}, None),
        ([], None),
    ],
)
def test_classify(obj, kind):
    assert kinds.classify(obj) == kind


def test_a_jsonl_chat_is_told_apart_from_json():
    assert kinds.classify_jsonl('{"user_name": "U", "character_name": "C"}\n{"mes": "hi"}') == kinds.CHAT
    assert kinds.classify_jsonl('{"entries": {}}') is None


def test_describe_unknown_names_a_few_fields():
    assert kinds.describe_unknown({f"k{i}": i for i in range(10)}).endswith('"k7" and 2 more')
