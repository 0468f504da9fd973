from __future__ import annotations

import base64
import copy
import io
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from orbchat.interop import cards, png, worldbooks
from orbchat.interop.errors import InteropError

FIXTURES = Path("/work/shared/fixtures/sillytavern")


def fixture(name: str) -> bytes:
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"the SillyTavern fixture {name} is not available")
    return path.read_bytes()


def image_bytes(fmt: str = "PNG", size: tuple[int, int] = (30, 40), mode: str = "RGB") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (10, 120, 200)).convert(mode).save(out, format=fmt)
    return out.getvalue()


def chunk_names(data: bytes) -> list[str]:
    """Return each chunk's type, with the keyword for tEXt ("tEXt chara"), walking the bytes directly."""
    pos, names = 8, []
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind = data[pos + 4 : pos + 8].decode("ascii")
        if kind == "tEXt":
            kind += " " + data[pos + 8 : pos + 8 + length].split(b"\0")[0].decode("latin-1")
        names.append(kind)
        pos += 12 + length
    return names


def b64(obj: dict | str) -> str:
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return base64.b64encode(text.encode()).decode()


def card_png(**chunks: str) -> bytes:
    return png.write_text_chunks(image_bytes(), list(chunks.items()), drop=set())


def v2_card(**data) -> dict:
    fields = {
        "name": "Ada",
        "description": "A clockwork archivist.",
        "personality": "precise",
        "scenario": "The archive at night.",
        "first_mes": "*Gears whir.* Hello.",
        "mes_example": "<START>\n{{user}}: Hi\n{{char}}: Greetings.",
        "creator_notes": "Made for tests.",
        "system_prompt": "Stay in character.",
        "post_history_instructions": "Be brief.",
        "alternate_greetings": ["Hi again.", "Who goes there?"],
        "tags": ["robot", "library"],
        "creator": "tester",
        "character_version": "2.1",
        "extensions": {"talkativeness": "0.8", "world": "Archive", "custom_ext": {"nested": [1, 2]}},
    }
    fields.update(data)
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": fields}


def rich_v3_card() -> dict:
    """A V3 card with unknown fields at every level."""
    return {
        "spec": "chara_card_v3",
        "spec_version": "3.0",
        "name": "Ada",
        "description": "A clockwork archivist.",
        "fav": True,
        "chat": "Ada - 2024-1-1",
        "top_secret": {"from": "another tool"},
        "data": {
            **v2_card()["data"],
            "extensions": {
                "talkativeness": 0.25,
                "fav": True,
                "depth_prompt": {"prompt": "Remember the gears.", "depth": 2, "role": "user"},
                "regex_scripts": [{"scriptName": "x", "findRegex": "/a/g"}],
                "unknown_tool": {"a": None},
            },
            "character_book": {
                "name": "Archive lore",
                "scan_depth": 3,
                "token_budget": 512,
                "extensions": {"book_ext": True},
                "entries": [
                    {
                        "id": 7,
                        "keys": ["archive"],
                        "secondary_keys": [],
                        "comment": "The archive",
                        "content": "Dusty shelves.",
                        "constant": False,
                        "selective": True,
                        "insertion_order": 50,
                        "enabled": True,
                        "position": "after_char",
                        "priority": 3,
                        "extensions": {"position": 4, "depth": 2, "weird": "kept"},
                    }
                ],
            },
            "group_only_greetings": ["Hello, everyone."],
            "nickname": "Addy",
            "assets": [{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}],
            "creation_date": 1700000000,
            "modification_date": 1700000500,
            "source": ["https://example.invalid/ada"],
            "creator_notes_multilingual": {"fr": "Pour les tests."},
            "something_new": [1, {"two": 2}],
        },
    }


def without_spec(card: dict) -> dict:
    """The card minus extra["spec"], which records the source format and so changes on export."""
    out = copy.deepcopy(card)
    del out["extra"]["spec"]
    return out


# --- Parsing ------------------------------------------------------------------------------------


def test_a_v2_card_is_normalized_with_exactly_the_card_keys():
    card = cards.parse_card_json(json.dumps(v2_card()))
    assert tuple(card) == cards.CARD_KEYS
    assert card["name"] == "Ada"
    assert card["system_prompt"] == "Stay in character."
    assert card["alternate_greetings"] == ["Hi again.", "Who goes there?"]
    assert card["tags"] == ["robot", "library"]
    assert card["talkativeness"] == 0.8
    assert card["extensions"] == {"world": "Archive", "custom_ext": {"nested": [1, 2]}}
    assert card["character_book"] is None
    assert card["extra"] == {"spec": "v2", "data": {"group_only_greetings": []}, "top": {}}


def test_a_v3_card_keeps_its_extra_fields():
    card = cards.parse_card_json(rich_v3_card())
    assert card["extra"]["spec"] == "v3"
    assert card["extra"]["top"] == {"chat": "Ada - 2024-1-1", "top_secret": {"from": "another tool"}}
    assert card["extra"]["data"]["group_only_greetings"] == ["Hello, everyone."]
    assert card["extra"]["data"]["nickname"] == "Addy"
    assert card["extra"]["data"]["creation_date"] == 1700000000
    assert card["extra"]["data"]["something_new"] == [1, {"two": 2}]
    assert card["talkativeness"] == 0.25
    assert "talkativeness" not in card["extensions"]
    assert card["extensions"]["unknown_tool"] == {"a": None}
    assert card["character_book"]["name"] == "Archive lore"


def test_parsing_does_not_change_the_given_dict():
    given = rich_v3_card()
    cards.parse_card_json(given)
    assert given == rich_v3_card()


def test_a_v1_card_reads_the_top_level_fields():
    v1 = {
        "name": "Old Timer",
        "description": "From 2023.",
        "personality": "grumpy",
        "scenario": "A porch.",
        "first_mes": "Get off my lawn.",
        "mes_example": "<START>\n{{char}}: Hmph.",
        "creatorcomment": "classic",
        "talkativeness": "0.3",
        "avatar": "none",
        "fav": False,
        "create_date": "2023-5-12",
        "mystery": 42,
    }
    card = cards.parse_card_json(json.dumps(v1).encode())
    assert card["name"] == "Old Timer"
    assert card["first_mes"] == "Get off my lawn."
    assert card["creator_notes"] == "classic"
    assert card["talkativeness"] == 0.3
    assert card["extra"]["spec"] == "v1" and card["extra"]["data"] == {"group_only_greetings": []}
    assert card["extra"]["top"]["mystery"] == 42


def test_a_pygmalion_card_is_read():
    card = cards.parse_card_json(
        {"char_name": "Pyg", "char_persona": "Old format.", "char_greeting": "Hi!", "world_scenario": "Here."}
    )
    assert card["name"] == "Pyg"
    assert card["description"] == "Old format."
    assert card["first_mes"] == "Hi!"
    assert card["scenario"] == "Here."
    assert card["extra"]["top"] == {}


def test_a_card_without_spec_but_with_data_is_read_as_v2():
    card = cards.parse_card_json({"data": {"name": "Specless", "description": "d"}})
    assert card["name"] == "Specless"
    assert card["extra"]["spec"] == "v2"


def test_v1_fields_fill_missing_or_empty_v2_fields():
    raw = v2_card(description="", first_mes=None, creator_notes="")
    del raw["data"]["scenario"]
    raw.update(description="Top description", first_mes="Top greeting", scenario="Top scenario")
    raw.update(creatorcomment="Top notes", tags=["top-tag"])
    raw["data"]["tags"] = []
    card = cards.parse_card_json(raw)
    assert card["description"] == "Top description"
    assert card["first_mes"] == "Top greeting"
    assert card["scenario"] == "Top scenario"
    assert card["creator_notes"] == "Top notes"
    assert card["tags"] == ["top-tag"]
    assert card["personality"] == "precise"


def test_a_v2_card_with_no_data_falls_back_to_v1_fields():
    card = cards.parse_card_json({"spec": "chara_card_v2", "spec_version": "2.0", "name": "Bare"})
    assert card["name"] == "Bare"


@pytest.mark.parametrize(
    ("stored", "expected"),
    [("0.5", 0.5), (" 0.9 ", 0.9), (0.1, 0.1), (1, 1.0), ("7", 1.0), (-2, 0.0), ("lots", 0.5), (None, 0.5)],
)
def test_talkativeness_accepts_strings_and_is_clamped(stored, expected):
    card = cards.parse_card_json(v2_card(extensions={"talkativeness": stored}))
    assert card["talkativeness"] == expected


def test_talkativeness_defaults_to_a_half():
    card = cards.parse_card_json(v2_card(extensions={}))
    assert card["talkativeness"] == 0.5


def test_odd_field_types_are_tolerated():
    card = cards.parse_card_json(
        v2_card(tags="fantasy, elf ,", alternate_greetings="only one", character_version=2, extensions=[1])
    )
    assert card["tags"] == ["fantasy", "elf"]
    assert card["alternate_greetings"] == ["only one"]
    assert card["character_version"] == "2"
    assert card["extensions"] == {}


# --- Refusals -----------------------------------------------------------------------------------


def test_a_card_without_a_name_is_refused():
    with pytest.raises(InteropError, match="^the card has no name$"):
        cards.parse_card_json(v2_card(name="  "))
    with pytest.raises(InteropError, match="^the card has no name$"):
        cards.parse_card_json({"description": "nameless"})


def test_an_unknown_spec_is_refused():
    with pytest.raises(InteropError, match=re.escape("unsupported card spec 'foo'")):
        cards.parse_card_json({"spec": "foo", "data": {"name": "x"}})


def test_invalid_json_names_the_problem_and_line():
    text = '{\n  "name": "Broken"\n  "description": "missing comma"\n}'
    with pytest.raises(
        InteropError, match=re.escape("the card's JSON is invalid: Expecting ',' delimiter at line 3")
    ):
        cards.parse_card_json(text)


def test_json_that_is_not_an_object_is_refused():
    with pytest.raises(InteropError, match="not an object"):
        cards.parse_card_json(b"[1, 2]")


def test_bytes_that_are_not_utf8_are_refused():
    with pytest.raises(InteropError, match="not UTF-8"):
        cards.parse_card_json(b"\xff\xfe{")


def test_a_utf8_bom_is_accepted():
    assert cards.parse_card_json("\ufeff" + json.dumps(v2_card()))["name"] == "Ada"
    assert cards.parse_card_json(b"\xef\xbb\xbf" + json.dumps(v2_card()).encode())["name"] == "Ada"


def test_oversized_input_is_refused():
    big = b"{" + b" " * (20 * 1024 * 1024) + b"}"
    with pytest.raises(InteropError, match="^the file is larger than 20 MB$"):
        cards.parse_card_json(big)
    with pytest.raises(InteropError, match="^the file is larger than 20 MB$"):
        cards.parse_card_png(png.SIGNATURE + big)
    with pytest.raises(InteropError, match="^the file is larger than 1 KB$"):
        cards.parse_card_json(json.dumps(v2_card(description="x" * 2000)), max_bytes=1024)


def test_non_png_bytes_are_refused():
    with pytest.raises(InteropError, match="^not a PNG image$"):
        cards.parse_card_png(image_bytes("JPEG"))


def test_a_truncated_png_is_refused():
    data = card_png(chara=b64(v2_card()))
    with pytest.raises(InteropError, match="^the PNG is truncated$"):
        cards.parse_card_png(data[: len(data) // 2])


def test_a_png_without_card_chunks_is_refused():
    data = card_png(Comment="just a picture")
    with pytest.raises(InteropError, match=re.escape("the PNG has no character card (no 'chara' or 'ccv3'")):
        cards.parse_card_png(data)


def test_invalid_base64_is_refused():
    with pytest.raises(InteropError, match="^the card's base64 is invalid$"):
        cards.parse_card_png(card_png(chara="!!! this is not base64 !!!"))


def test_base64_of_invalid_json_is_refused():
    with pytest.raises(InteropError, match="the card's JSON is invalid: "):
        cards.parse_card_png(card_png(chara=b64('{"name": "x",}')))


def test_base64_without_padding_or_with_line_breaks_is_read():
    encoded = b64(v2_card()).rstrip("=")
    wrapped = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    card, _ = cards.parse_card_png(card_png(chara=wrapped))
    assert card["name"] == "Ada"


# --- PNG cards ----------------------------------------------------------------------------------


def test_ccv3_wins_over_chara_whatever_the_case_or_order():
    v3 = rich_v3_card()
    v3["data"]["name"] = "From ccv3"
    data = card_png(CCV3=b64(v3), Chara=b64(v2_card(name="From chara")))
    card, _ = cards.parse_card_png(data)
    assert card["name"] == "From ccv3"
    assert card["extra"]["spec"] == "v3"


def test_the_avatar_comes_back_without_the_card_chunks():
    data = card_png(chara=b64(v2_card()), Title="portrait")
    _, avatar = cards.parse_card_png(data)
    assert png.read_text_chunks(avatar) == {"title": "portrait"}
    with Image.open(io.BytesIO(avatar)) as image:
        assert image.size == (30, 40)


def test_export_png_writes_chara_then_ccv3_before_iend_and_drops_old_ones():
    avatar = card_png(chara=b64(v2_card(name="Stale")), Title="portrait", ccv3=b64(v2_card(name="Stale too")))
    card = cards.parse_card_json(rich_v3_card())
    exported = cards.export_card_png(card, avatar)
    assert chunk_names(exported)[-4:] == ["tEXt Title", "tEXt chara", "tEXt ccv3", "IEND"]
    chunks = png.read_text_chunks(exported)
    assert json.loads(base64.b64decode(chunks["chara"]))["spec"] == "chara_card_v2"
    assert json.loads(base64.b64decode(chunks["ccv3"]))["spec"] == "chara_card_v3"
    assert cards.parse_card_png(exported)[0] == card


def test_export_png_without_an_avatar_makes_a_placeholder():
    exported = cards.export_card_png(cards.parse_card_json(v2_card()), None)
    with Image.open(io.BytesIO(exported)) as image:
        assert image.format == "PNG"
        assert image.size == (400, 600)
    assert cards.parse_card_png(exported)[0]["name"] == "Ada"


@pytest.mark.parametrize(("fmt", "mode"), [("JPEG", "RGB"), ("JPEG", "CMYK"), ("GIF", "L"), ("WEBP", "RGB")])
def test_export_png_converts_other_images(fmt, mode):
    exported = cards.export_card_png(cards.parse_card_json(v2_card()), image_bytes(fmt, (64, 48), mode))
    with Image.open(io.BytesIO(exported)) as image:
        assert image.format == "PNG"
        assert image.size == (64, 48)
    assert cards.parse_card_png(exported)[0]["name"] == "Ada"


def test_export_png_refuses_an_avatar_that_is_no_image():
    with pytest.raises(InteropError, match="avatar is not an image"):
        cards.export_card_png(cards.parse_card_json(v2_card()), b"definitely not an image")


# --- Export shape -------------------------------------------------------------------------------


def test_card_to_v2_is_sillytaverns_shape():
    card = cards.parse_card_json(v2_card())
    assert cards.card_to_v2(card) == {
        "name": "Ada",
        "description": "A clockwork archivist.",
        "personality": "precise",
        "scenario": "The archive at night.",
        "first_mes": "*Gears whir.* Hello.",
        "mes_example": "<START>\n{{user}}: Hi\n{{char}}: Greetings.",
        "creatorcomment": "Made for tests.",
        "talkativeness": "0.8",
        "fav": False,
        "tags": ["robot", "library"],
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Ada",
            "description": "A clockwork archivist.",
            "personality": "precise",
            "scenario": "The archive at night.",
            "first_mes": "*Gears whir.* Hello.",
            "mes_example": "<START>\n{{user}}: Hi\n{{char}}: Greetings.",
            "creator_notes": "Made for tests.",
            "system_prompt": "Stay in character.",
            "post_history_instructions": "Be brief.",
            "tags": ["robot", "library"],
            "creator": "tester",
            "character_version": "2.1",
            "alternate_greetings": ["Hi again.", "Who goes there?"],
            "extensions": {"talkativeness": "0.8", "world": "Archive", "custom_ext": {"nested": [1, 2]}},
            "group_only_greetings": [],
        },
    }


def test_card_to_v3_carries_group_only_greetings_and_the_extras():
    card = cards.parse_card_json(rich_v3_card())
    out = cards.card_to_v3(card)
    assert (out["spec"], out["spec_version"]) == ("chara_card_v3", "3.0")
    assert out["data"]["group_only_greetings"] == ["Hello, everyone."]
    assert out["data"]["nickname"] == "Addy"
    assert out["data"]["extensions"]["talkativeness"] == "0.25"
    assert out["talkativeness"] == "0.25"
    assert out["top_secret"] == {"from": "another tool"}
    assert out["fav"] is True
    assert out["chat"] == "Ada - 2024-1-1"  # SillyTavern's bookkeeping comes back as it came

    bare = dict(card, extra={})
    assert cards.card_to_v3(bare)["data"]["group_only_greetings"] == []
    assert "group_only_greetings" not in cards.card_to_v2(bare)["data"]


def test_talkativeness_is_written_as_javascript_writes_numbers():
    card = cards.parse_card_json(v2_card())
    for value, text in [(0.5, "0.5"), (1.0, "1"), (0.0, "0"), (0.125, "0.125")]:
        card["talkativeness"] = value
        assert cards.card_to_v2(card)["data"]["extensions"]["talkativeness"] == text


def test_export_json_is_v3_utf8():
    card = cards.parse_card_json(v2_card(description="Ünïcödé ✓"))
    data = cards.export_card_json(card)
    assert "Ünïcödé ✓".encode() in data
    assert json.loads(data)["spec"] == "chara_card_v3"


# --- Round trips --------------------------------------------------------------------------------


def test_a_rich_v3_card_survives_json_and_png_round_trips_exactly():
    card = cards.parse_card_json(rich_v3_card())
    assert cards.parse_card_json(cards.export_card_json(card)) == card
    again, _ = cards.parse_card_png(cards.export_card_png(card, image_bytes()))
    assert again == card


def test_a_v2_card_round_trips_except_for_the_recorded_source_spec():
    card = cards.parse_card_json(v2_card(extra_field={"kept": True}))
    assert card["extra"]["data"]["extra_field"] == {"kept": True}
    again = cards.parse_card_json(cards.export_card_json(card))
    assert again["extra"]["spec"] == "v3"
    assert without_spec(again) == without_spec(card)
    from_png, _ = cards.parse_card_png(cards.export_card_png(card, None))
    assert without_spec(from_png) == without_spec(card)


def test_a_v1_card_round_trips():
    card = cards.parse_card_json({"name": "Old", "description": "d", "talkativeness": "0.7", "odd": [1]})
    again = cards.parse_card_json(cards.export_card_json(card))
    assert without_spec(again) == without_spec(card)


def test_the_v2_chunk_also_reads_back_the_same():
    card = cards.parse_card_json(rich_v3_card())
    chunks = png.read_text_chunks(cards.export_card_png(card, None))
    from_v2 = cards.parse_card_json(base64.b64decode(chunks["chara"]))
    assert without_spec(from_v2) == without_spec(card)


# --- SillyTavern's own cards --------------------------------------------------------------------


def test_seraphina_v2_png():
    card, avatar = cards.parse_card_png(fixture("seraphina_v2.png"))
    assert card["name"] == "Seraphina"
    assert card["creator"] == "OtisAlejandro"
    assert card["creator_notes"].startswith("ST Default Bot contest winner")
    assert card["talkativeness"] == 0.5
    assert card["extensions"] == {"fav": False, "world": "Eldoria"}
    assert card["extra"]["spec"] == "v2" and card["extra"]["data"] == {"group_only_greetings": []}
    assert set(card["extra"]["top"]) == {"avatar", "chat", "create_date"}
    book = worldbooks.parse_character_book(card["character_book"])
    assert book["name"] == "Eldoria"
    assert len(book["entries"]) == 4
    assert png.read_text_chunks(avatar) == {}


def test_seraphina_v3_png_prefers_ccv3_and_keeps_its_extensions():
    card, _ = cards.parse_card_png(fixture("seraphina_v2_v3.png"))
    assert card["name"] == "Seraphina"
    assert card["extra"]["spec"] == "v3"
    assert card["extensions"]["depth_prompt"] == {"prompt": "", "depth": 4, "role": "system"}
    assert card["extra"]["data"]["group_only_greetings"] == []
    assert len(card["character_book"]["entries"]) == 4

    exported = cards.export_card_png(card, None)
    chunks = png.read_text_chunks(exported)
    for keyword in ("chara", "ccv3"):
        data = json.loads(base64.b64decode(chunks[keyword]))["data"]
        assert data["extensions"]["depth_prompt"] == {"prompt": "", "depth": 4, "role": "system"}
        assert data["extensions"]["talkativeness"] == "0.5"
        assert data["group_only_greetings"] == []
        assert data["character_book"] == card["character_book"]


@pytest.mark.parametrize("name", ["seraphina_v2.png", "seraphina_v2_v3.png"])
def test_sillytavern_cards_round_trip(name):
    card, avatar = cards.parse_card_png(fixture(name))
    from_png, avatar_again = cards.parse_card_png(cards.export_card_png(card, avatar))
    assert without_spec(from_png) == without_spec(card)
    assert avatar_again == avatar
    assert without_spec(cards.parse_card_json(cards.export_card_json(card))) == without_spec(card)


def test_sillytavern_v3_card_matches_what_sillytavern_wrote():
    """Our V3 export of Seraphina equals SillyTavern's own ccv3 chunk, bookkeeping fields included."""
    original = json.loads(base64.b64decode(png.read_text_chunks(fixture("seraphina_v2_v3.png"))["ccv3"]))
    card = cards.parse_card_json(original)
    assert cards.card_to_v3(card) == original


# --- Example dialogue ---------------------------------------------------------------------------


def test_split_examples():
    text = "<START>\n{{user}}: Hi\n{{char}}: Hello\n<start>\n{{user}}: Bye\n<START>\n"
    assert cards.split_examples(text) == ["{{user}}: Hi\n{{char}}: Hello", "{{user}}: Bye"]
    assert cards.split_examples("") == []
