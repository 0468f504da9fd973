from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path

import pytest

from orbchat.interop import png, worldbooks
from orbchat.interop.errors import InteropError

FIXTURES = Path("/work/shared/fixtures/sillytavern")


def fixture(name: str) -> bytes:
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"the SillyTavern fixture {name} is not available")
    return path.read_bytes()


def embedded_book(png_name: str) -> dict:
    chunks = png.read_text_chunks(fixture(png_name))
    card = json.loads(base64.b64decode(chunks.get("ccv3") or chunks["chara"]))
    return card["data"]["character_book"]


def pick(entry: dict, expected: dict) -> dict:
    """Return the entry's values for the expected keys, so one assert compares many fields."""
    return {key: entry.get(key) for key in expected}


def wi_entry(**fields) -> dict:
    return {"uid": 0, "key": ["tower"], "content": "A tall tower.", **fields}


def book_entry(**fields) -> dict:
    return {
        "id": 1,
        "keys": ["gate"],
        "secondary_keys": ["iron"],
        "comment": "The gate",
        "content": "An iron gate.",
        "constant": False,
        "selective": True,
        "insertion_order": 90,
        "enabled": True,
        "position": "before_char",
        **fields,
    }


# --- World Info JSON ----------------------------------------------------------------------------


def test_entries_have_exactly_the_normalized_keys():
    book = worldbooks.parse_world_info({"entries": {"0": wi_entry()}}, name="Towers")
    assert book["name"] == "Towers"
    assert tuple(book["entries"][0]) == worldbooks.ENTRY_KEYS
    assert book["extra"] == {}


def test_missing_fields_take_sillytaverns_defaults():
    entry = worldbooks.parse_world_info({"entries": {"5": {"key": ["x"]}}})["entries"][0]
    assert entry == {
        "uid": 5,
        "keys": ["x"],
        "secondary_keys": [],
        "selective": False,  # SillyTavern's scan: missing = no secondary check
        "selective_logic": 0,
        "comment": "",
        "content": "",
        "constant": False,
        "enabled": True,
        "order": 100,
        "probability": 100,
        "use_probability": False,  # missing = never rolled
        "position": 0,
        "depth": 4,
        "role": 0,
        "group": "",
        "group_override": False,
        "group_weight": 100,
        "use_group_scoring": None,
        "prevent_recursion": False,
        "exclude_recursion": False,
        "delay_until_recursion": 0,
        "scan_depth": None,
        "case_sensitive": None,
        "match_whole_words": None,
        "sticky": None,
        "cooldown": None,
        "delay": None,
        "extra": {},
    }


def test_every_field_is_read():
    raw = wi_entry(
        uid=3,
        keysecondary=["stone"],
        selective=False,
        selectiveLogic=2,
        comment="Tower",
        constant=True,
        disable=True,
        order=7,
        probability=40,
        useProbability=False,
        position=4,
        depth=2,
        role=2,
        group="places,landmarks",
        groupOverride=True,
        groupWeight=30,
        useGroupScoring=True,
        preventRecursion=True,
        excludeRecursion=True,
        delayUntilRecursion=True,
        scanDepth=6,
        caseSensitive=True,
        matchWholeWords=False,
        sticky=2,
        cooldown=3,
        delay=1,
        vectorized=True,
        characterFilter={"isExclude": True, "names": ["Ada"], "tags": []},
        outletName="",
        brandNew={"x": 1},
    )
    entry = worldbooks.parse_world_info({"entries": {"3": raw}})["entries"][0]
    assert entry["secondary_keys"] == ["stone"]
    expected = {
        "selective": False,
        "selective_logic": 2,
        "constant": True,
        "enabled": False,
        "order": 7,
        "probability": 40,
        "use_probability": False,
        "position": 4,
        "depth": 2,
        "role": 2,
        "group": "places,landmarks",
        "group_override": True,
        "group_weight": 30,
        "use_group_scoring": True,
        "prevent_recursion": True,
        "exclude_recursion": True,
        "delay_until_recursion": 1,
        "scan_depth": 6,
        "case_sensitive": True,
        "match_whole_words": False,
        "sticky": 2,
        "cooldown": 3,
        "delay": 1,
    }
    assert pick(entry, expected) == expected
    assert entry["extra"] == {
        "vectorized": True,
        "characterFilter": {"isExclude": True, "names": ["Ada"], "tags": []},
        "outletName": "",
        "brandNew": {"x": 1},
    }


def test_delay_until_recursion_levels():
    entries = {
        str(i): wi_entry(uid=i, delayUntilRecursion=value) for i, value in enumerate([False, True, 3, None])
    }
    parsed = worldbooks.parse_world_info({"entries": entries})["entries"]
    assert [e["delay_until_recursion"] for e in parsed] == [0, 1, 3, 0]
    exported = worldbooks.export_world_info({"entries": parsed})["entries"]
    assert [exported[str(i)]["delayUntilRecursion"] for i in range(4)] == [False, True, 3, False]


def test_role_null_is_kept_as_none():
    entries = worldbooks.parse_world_info({"entries": {"0": wi_entry(role=None)}})["entries"]
    assert entries[0]["role"] is None
    assert worldbooks.export_world_info({"entries": entries})["entries"]["0"]["role"] is None


def test_bad_values_are_coerced_to_something_valid():
    raw = wi_entry(
        position=9,
        selectiveLogic="3",
        probability=250,
        role=7,
        depth=-3,
        order="12",
        sticky="soon",
        key="alpha, beta ,",
        disable="false",
    )
    entry = worldbooks.parse_world_info({"entries": [raw]})["entries"][0]
    expected = {
        "position": 0,
        "selective_logic": 3,
        "probability": 100,
        "role": 0,
        "depth": 0,
        "order": 12,
        "sticky": None,
    }
    assert pick(entry, expected) == expected
    assert entry["keys"] == ["alpha", "beta"]
    assert entry["enabled"] is True


def test_enabled_is_read_when_disable_is_absent():
    entry = worldbooks.parse_world_info({"entries": [wi_entry(enabled=False)]})["entries"][0]
    assert entry["enabled"] is False
    assert entry["extra"] == {}


def test_entries_may_be_a_list_and_uids_fall_back_to_the_position():
    book = worldbooks.parse_world_info({"entries": [{"key": ["a"]}, {"key": ["b"]}]})
    assert [e["uid"] for e in book["entries"]] == [0, 1]


def test_repeated_uids_get_the_next_free_one():
    book = worldbooks.parse_world_info({"entries": {"a": wi_entry(uid=4), "b": wi_entry(uid=4)}})
    assert [e["uid"] for e in book["entries"]] == [4, 5]
    assert set(worldbooks.export_world_info(book)["entries"]) == {"4", "5"}


def test_the_book_name_comes_from_the_caller_then_the_file():
    raw = {"entries": {}, "name": "In the file"}
    assert worldbooks.parse_world_info(raw, name="Given")["name"] == "Given"
    assert worldbooks.parse_world_info(raw)["name"] == "In the file"
    assert worldbooks.parse_world_info({"entries": {}})["name"] == ""


def test_a_file_without_entries_is_refused():
    with pytest.raises(InteropError, match=re.escape("not a World Info file: it has no 'entries'")):
        worldbooks.parse_world_info({"name": "nope"})


def test_an_entry_that_is_not_an_object_is_named():
    with pytest.raises(InteropError, match=re.escape("World Info entry '7' is not an object")):
        worldbooks.parse_world_info({"entries": {"0": wi_entry(), "7": "oops"}})
    with pytest.raises(InteropError, match=re.escape("World Info entry 1 is not an object")):
        worldbooks.parse_world_info({"entries": [wi_entry(), 3]})


def test_other_malformed_files_are_refused():
    with pytest.raises(InteropError, match="it is not a JSON object"):
        worldbooks.parse_world_info(b"[]")
    with pytest.raises(InteropError, match="neither a list nor an object"):
        worldbooks.parse_world_info({"entries": "abc"})
    with pytest.raises(InteropError, match=re.escape("the World Info file's JSON is invalid: ")):
        worldbooks.parse_world_info(b'{"entries": {,}}')
    with pytest.raises(InteropError, match="larger than 1 KB"):
        worldbooks.parse_world_info(json.dumps({"entries": {}, "pad": "x" * 2000}), max_bytes=1024)


def test_ten_thousand_entries_import_and_more_than_fifty_thousand_are_refused():
    many = {"entries": {str(i): {"key": [f"k{i}"], "content": "c"} for i in range(10_000)}}
    assert len(worldbooks.parse_world_info(json.dumps(many))["entries"]) == 10_000
    too_many = {"entries": [{}] * 50_001}
    with pytest.raises(InteropError, match="50,001 entries; at most 50,000 can be imported"):
        worldbooks.parse_world_info(too_many)


def test_export_writes_every_field_in_sillytaverns_names():
    book = worldbooks.parse_world_info({"entries": {"2": wi_entry(uid=2, extraThing=[1])}}, name="T")
    assert worldbooks.export_world_info(book) == {
        "entries": {
            "2": {
                "uid": 2,
                "key": ["tower"],
                "keysecondary": [],
                "selective": False,
                "selectiveLogic": 0,
                "comment": "",
                "content": "A tall tower.",
                "constant": False,
                "order": 100,
                "probability": 100,
                "useProbability": False,
                "position": 0,
                "depth": 4,
                "role": 0,
                "group": "",
                "groupOverride": False,
                "groupWeight": 100,
                "useGroupScoring": None,
                "preventRecursion": False,
                "excludeRecursion": False,
                "delayUntilRecursion": False,
                "scanDepth": None,
                "caseSensitive": None,
                "matchWholeWords": None,
                "sticky": None,
                "cooldown": None,
                "delay": None,
                "disable": False,
                "extraThing": [1],
            }
        }
    }


def test_export_fills_in_a_partial_hand_made_entry():
    out = worldbooks.export_world_info(
        {"name": "x", "entries": [{"uid": 1, "keys": ["k"], "enabled": False}]}
    )
    assert out["entries"]["1"]["disable"] is True
    assert out["entries"]["1"]["order"] == 100


def test_unknown_fields_survive_a_round_trip():
    raw = {
        "entries": {"0": wi_entry(futureField={"deep": [1, None]}, displayIndex=3), "1": wi_entry(uid=1)},
        "originalData": {"name": "Old book", "entries": []},
        "name": "Towers",
        "settings": {"x": 1},
    }
    book = worldbooks.parse_world_info(raw)
    assert book["extra"] == {
        "originalData": {"name": "Old book", "entries": []},
        "name": "Towers",
        "settings": {"x": 1},
    }
    exported = worldbooks.export_world_info(book)
    assert exported["entries"]["0"]["futureField"] == {"deep": [1, None]}
    assert exported["originalData"] == raw["originalData"]
    assert worldbooks.parse_world_info(json.dumps(exported)) == book


def test_a_missing_selective_or_use_probability_reads_as_sillytaverns_scan_reads_it():
    entry = worldbooks.parse_world_info({"entries": {"1": wi_entry(keysecondary=["night"], probability=10)}})[
        "entries"
    ][0]
    # Secondary keys are not checked and the 10 % is not rolled: the entry fires on "tower" alone.
    assert (entry["selective"], entry["use_probability"]) == (False, False)
    written = worldbooks.parse_world_info(
        {
            "entries": {
                "1": wi_entry(keysecondary=["night"], probability=10, selective=True, useProbability=True)
            }
        }
    )["entries"][0]
    assert (written["selective"], written["use_probability"]) == (True, True)
    unrolled = worldbooks.parse_world_info({"entries": {"1": wi_entry(useProbability=True)}})["entries"][0]
    assert unrolled["probability"] == 0  # SillyTavern's roll against no probability never passes


def test_eldoria_minimal_gets_defaults_filled():
    book = worldbooks.parse_world_info(fixture("eldoria_minimal.json"), name="Eldoria")
    assert len(book["entries"]) == 4
    first = book["entries"][0]
    assert first["keys"] == ["eldoria", "wood", "forest", "magical forest"]
    assert first["selective"] is False
    expected = {
        "role": 0,
        "depth": 4,
        "probability": 100,
        "use_probability": False,
        "group_weight": 100,
        "sticky": None,
        "scan_depth": None,
    }
    assert pick(first, expected) == expected
    assert all(entry["extra"] == {} for entry in book["entries"])
    exported = worldbooks.export_world_info(book)
    assert exported["entries"]["0"]["selectiveLogic"] == 0
    assert exported["entries"]["0"]["useProbability"] is False
    assert worldbooks.parse_world_info(exported, name="Eldoria") == book


def test_eldoria_full_keeps_role_null_and_every_field():
    raw = json.loads(fixture("eldoria_full.json"))
    book = worldbooks.parse_world_info(raw, name="Eldoria")
    first = book["entries"][0]
    expected = {"role": None, "sticky": 0, "cooldown": 0, "delay": 0, "comment": "eldoria"}
    assert pick(first, expected) == expected
    assert first["extra"] == {"displayIndex": 0, "addMemo": True, "vectorized": False, "automationId": ""}
    exported = worldbooks.export_world_info(book)
    for uid, original in raw["entries"].items():
        # The file predates selectiveLogic; everything it has comes back unchanged.
        assert exported["entries"][uid] == {**original, "selectiveLogic": 0}
    assert worldbooks.parse_world_info(exported, name="Eldoria") == book


def test_a_character_book_entry_is_normalized():
    book = worldbooks.parse_character_book(
        {
            "name": "Gates",
            "description": "About gates.",
            "scan_depth": 5,
            "token_budget": 300,
            "recursive_scanning": False,
            "extensions": {"x": 1},
            "entries": [
                book_entry(
                    extensions={
                        "depth": 2,
                        "probability": 60,
                        "useProbability": True,
                        "selectiveLogic": 1,
                        "group": "doors",
                        "group_override": True,
                        "group_weight": 20,
                        "prevent_recursion": True,
                        "exclude_recursion": True,
                        "delay_until_recursion": 2,
                        "scan_depth": 3,
                        "match_whole_words": False,
                        "case_sensitive": True,
                        "role": 1,
                        "sticky": 4,
                        "cooldown": 5,
                        "delay": 6,
                        "use_group_scoring": True,
                    }
                )
            ],
        }
    )
    assert book["name"] == "Gates"
    assert book["extra"] == {
        "description": "About gates.",
        "scan_depth": 5,
        "token_budget": 300,
        "recursive_scanning": False,
        "extensions": {"x": 1},
    }
    entry = book["entries"][0]
    assert tuple(entry) == worldbooks.ENTRY_KEYS
    expected = {
        "uid": 1,
        "keys": ["gate"],
        "secondary_keys": ["iron"],
        "order": 90,
        "position": 0,
        "depth": 2,
        "probability": 60,
        "selective_logic": 1,
        "group": "doors",
        "group_override": True,
        "group_weight": 20,
        "prevent_recursion": True,
        "exclude_recursion": True,
        "delay_until_recursion": 2,
        "scan_depth": 3,
        "match_whole_words": False,
        "case_sensitive": True,
        "role": 1,
        "sticky": 4,
        "cooldown": 5,
        "delay": 6,
        "use_group_scoring": True,
    }
    assert pick(entry, expected) == expected
    assert entry["extra"] == {}


def test_extensions_position_wins_over_the_position_string():
    entries = worldbooks.parse_character_book(
        {
            "entries": [
                book_entry(id=0, position="before_char", extensions={"position": 4}),
                book_entry(id=1, position="after_char"),
                book_entry(id=2, position="before_char"),
                book_entry(id=3, position="before_char", extensions={"position": None}),
            ]
        }
    )["entries"]
    assert [e["position"] for e in entries] == [4, 1, 0, 0]


def test_a_sparse_character_book_entry_takes_sillytaverns_card_defaults():
    entry = worldbooks.parse_character_book({"entries": [{"keys": ["k"], "content": "c"}]})["entries"][0]
    expected = {"uid": 0, "selective": False, "enabled": True, "position": 1, "role": 0}
    assert pick(entry, expected) == expected


def test_character_book_refusals():
    with pytest.raises(InteropError, match="the character book is not an object"):
        worldbooks.parse_character_book(["x"])
    with pytest.raises(InteropError, match="character book entry 1 is not an object"):
        worldbooks.parse_character_book({"entries": [book_entry(), None]})
    assert worldbooks.parse_character_book({"name": "Empty"}) == {
        "name": "Empty",
        "entries": [],
        "extra": {},
        "settings": {},
    }


def test_unknown_character_book_fields_survive_at_every_level():
    raw = {
        "name": "Gates",
        "token_budget": 200,
        "mystery_book_field": [1],
        "entries": [
            book_entry(
                priority=5,
                name="gate entry",
                use_regex=False,
                mystery_entry_field={"a": 1},
                extensions={
                    "position": 3,
                    "display_index": 8,
                    "automation_id": "auto",
                    "vectorized": True,
                    "mystery_extension": "kept",
                },
            )
        ],
    }
    book = worldbooks.parse_character_book(copy.deepcopy(raw))
    assert book["entries"][0]["extra"] == {
        "displayIndex": 8,
        "automationId": "auto",
        "vectorized": True,
        "use_regex": False,
        "extensions": {"mystery_extension": "kept"},
        "priority": 5,
        "name": "gate entry",
        "mystery_entry_field": {"a": 1},
    }
    exported = worldbooks.export_character_book(book)
    assert exported["mystery_book_field"] == [1]
    entry = exported["entries"][0]
    for key in ("priority", "name", "use_regex", "mystery_entry_field"):
        assert entry[key] == raw["entries"][0][key]
    for key, value in raw["entries"][0]["extensions"].items():
        assert entry["extensions"][key] == value
    assert worldbooks.parse_character_book(exported) == book


def test_seraphina_v2_book_has_four_sparse_entries():
    book = worldbooks.parse_character_book(embedded_book("seraphina_v2.png"))
    assert book["name"] == "Eldoria"
    assert [e["uid"] for e in book["entries"]] == [0, 1, 2, 3]
    first = book["entries"][0]
    assert first["keys"] == ["eldoria", "wood", "forest", "magical forest"]
    expected = {
        "position": 0,
        "probability": 100,
        "use_probability": False,
        "selective": False,
        "enabled": True,
        "order": 100,
    }
    assert pick(first, expected) == expected
    exported = worldbooks.export_character_book(book)
    assert exported["entries"][0]["extensions"]["useProbability"] is False
    assert worldbooks.parse_character_book(exported) == book


def test_sillytavern_full_book_round_trips_exactly():
    raw = embedded_book("seraphina_v2_v3.png")
    book = worldbooks.parse_character_book(raw)
    assert book["entries"][0]["extra"] == {"displayIndex": 0}
    assert book["entries"][0]["role"] == 0
    assert worldbooks.export_character_book(book) == raw


def test_an_entry_moves_between_the_two_formats():
    full = json.loads(fixture("eldoria_full.json"))
    from_wi = worldbooks.parse_world_info(full, name="Eldoria")
    as_card_book = worldbooks.export_character_book(from_wi)
    assert as_card_book["name"] == "Eldoria"
    first = as_card_book["entries"][0]
    assert first["extensions"]["display_index"] == 0
    assert first["extensions"]["role"] is None
    assert first["addMemo"] is True
    back = worldbooks.parse_character_book(as_card_book)
    assert [e["extra"] for e in back["entries"]] == [{"displayIndex": i, "addMemo": True} for i in range(4)]
    strip = ("extra",)
    assert [{k: v for k, v in e.items() if k not in strip} for e in back["entries"]] == [
        {k: v for k, v in e.items() if k not in strip} for e in from_wi["entries"]
    ]


def test_a_lorebook_file_in_character_book_shape_is_read_as_world_info():
    book = worldbooks.parse_world_info(
        {"name": "Gates", "scan_depth": 2, "entries": [book_entry(id=4)]}, name="From file"
    )
    assert book["name"] == "From file"
    assert book["entries"][0]["uid"] == 4
    assert book["entries"][0]["keys"] == ["gate"]
    assert book["extra"] == {"scan_depth": 2}
