from __future__ import annotations

from PIL import Image

from orbchat.library.starter import AVATAR_PATH, CHARACTER, PERSONA, WORLD_BOOK

CHARACTER_KEYS = {
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "alternate_greetings",
    "tags",
    "creator",
    "character_version",
    "talkativeness",
    "extensions",
    "character_book",
    "extra",
}

ENTRY_KEYS = {
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
}


def test_character_has_every_card_field():
    assert set(CHARACTER) == CHARACTER_KEYS
    for field in ("name", "first_mes", "description"):
        assert CHARACTER[field].strip()
    assert len(CHARACTER["alternate_greetings"]) == 2
    assert all(greeting.strip() for greeting in CHARACTER["alternate_greetings"])
    assert CHARACTER["creator"] == "OrbChat"
    assert CHARACTER["character_version"] == "1.0"
    assert CHARACTER["talkativeness"] == 0.5
    assert CHARACTER["character_book"] is None


def test_character_uses_macros_and_sillytavern_examples():
    assert "{{char}}" in CHARACTER["description"]
    assert "{{user}}" in CHARACTER["first_mes"]
    blocks = CHARACTER["mes_example"].split("<START>")
    assert blocks[0] == ""
    assert all("{{user}}:" in block and "{{char}}:" in block for block in blocks[1:])


def test_world_book_entries_have_exactly_the_entry_fields():
    assert set(WORLD_BOOK) == {"name", "entries", "extra"}
    entries = WORLD_BOOK["entries"]
    assert 5 <= len(entries) <= 8
    assert all(set(entry) == ENTRY_KEYS for entry in entries)
    assert len({entry["uid"] for entry in entries}) == len(entries)
    assert all(entry["keys"] and entry["content"].strip() for entry in entries)


def test_world_book_shows_constant_selective_and_recursive_entries():
    entries = WORLD_BOOK["entries"]
    assert any(entry["constant"] for entry in entries)
    assert any(entry["secondary_keys"] and entry["selective_logic"] == 0 for entry in entries)

    def mentions_another(entry):
        content = entry["content"].lower()
        return any(
            key.lower() in content
            for other in entries
            if other is not entry and not other["constant"]
            for key in other["keys"]
        )

    assert any(mentions_another(entry) for entry in entries if not entry["constant"])


def test_world_book_entries_do_not_share_mutable_values():
    first, second = WORLD_BOOK["entries"][:2]
    assert first["extra"] is not second["extra"]
    assert first["secondary_keys"] is not second["secondary_keys"]


def test_persona():
    assert "name" not in PERSONA  # named after the account it is installed for
    assert PERSONA["description"].strip()


def test_avatar_is_a_400_by_600_png():
    assert AVATAR_PATH.name == "avatar.png"
    assert AVATAR_PATH.stat().st_size < 200 * 1024
    with Image.open(AVATAR_PATH) as image:
        assert image.format == "PNG"
        assert image.size == (400, 600)
        image.verify()
