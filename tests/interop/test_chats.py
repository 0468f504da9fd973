from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from orbchat.interop import chats
from orbchat.interop.errors import InteropError

HEADER = {
    "user_name": "Alex",
    "character_name": "Seraphina",
    "create_date": "2023-06-19@14h20m05s",
    "chat_metadata": {
        "note_prompt": "Keep it gentle.",
        "note_interval": 3,
        "note_position": 1,
        "note_depth": 4,
        "note_role": 0,
        "world_info": "Eldoria",
        "persona": "alex.png",
    },
    "integrity": "abc-123",
}


def jsonl(*lines: dict | list | str) -> bytes:
    """Return a chat file from objects (dumped as JSON) and raw strings (written as they are)."""
    text = "\n".join(
        line if isinstance(line, str) else json.dumps(line, ensure_ascii=False) for line in lines
    )
    return (text + "\n").encode("utf-8")


def message(name: str = "Seraphina", mes: str = "Hello.", **fields) -> dict:
    return {
        "name": name,
        "is_user": False,
        "is_system": False,
        "send_date": 1718000000000,
        "mes": mes,
        **fields,
    }


def solo_chat() -> bytes:
    return jsonl(
        HEADER,
        message(
            mes="Welcome to the glade.",
            send_date="June 19, 2023 2:20pm",
            extra={"api": "openai", "model": "gpt-4o", "token_count": 12, "gen_id": 1718000000001},
            force_avatar="/thumbnail?type=avatar&file=seraphina.png",
            original_avatar="seraphina.png",
            title="",
        ),
        message(name="Alex", mes="Where am I? — ünïcödé", is_user=True, send_date="2024-7-12@01h31m37s"),
        message(
            mes="Second try.",
            send_date="2024-6-5 @14h 56m 50s 682ms",
            swipes=["First try.", "Second try.", "Third try."],
            swipe_id=1,
            swipe_info=[
                {"send_date": "2024-6-5 @14h 56m 40s 1ms", "extra": {"model": "a"}},
                {"send_date": "2024-6-5 @14h 56m 50s 682ms", "extra": {"model": "b"}},
                {"send_date": "2024-6-5 @14h 57m 02s 9ms", "extra": {"model": "c"}},
            ],
            gen_started="2024-06-05T14:56:48.000Z",
            gen_finished="2024-06-05T14:56:50.682Z",
            extra={"api": "openai", "model": "gpt-4o", "token_count": 40},
        ),
        message(
            name="Alex", mes="(an aside)", is_user=True, is_system=True, send_date="2024-07-12T01:31:37Z"
        ),
        message(mes="No zone.", send_date="2024-07-12T01:31:37.250"),
    )


# --- parsing ------------------------------------------------------------------------------------


def test_header_fields_are_kept():
    chat = chats.parse_chat_jsonl(solo_chat())
    assert chat.user_name == "Alex"
    assert chat.character_name == "Seraphina"
    assert chat.create_date == "2023-06-19@14h20m05s"
    assert chat.chat_metadata == HEADER["chat_metadata"]
    assert chat.header_other == {"integrity": "abc-123"}
    assert chat.problems == []
    assert [m.name for m in chat.messages] == ["Seraphina", "Alex", "Seraphina", "Alex", "Seraphina"]
    assert [m.is_user for m in chat.messages] == [False, True, False, True, False]


def test_swipes_swipe_id_and_swipe_info():
    chat = chats.parse_chat_jsonl(solo_chat())
    swiped = chat.messages[2]
    assert swiped.swipes == ["First try.", "Second try.", "Third try."]
    assert swiped.swipe_id == 1
    assert swiped.mes == "Second try."
    assert [info["extra"]["model"] for info in swiped.swipe_info] == ["a", "b", "c"]
    assert swiped.other == {
        "gen_started": "2024-06-05T14:56:48.000Z",
        "gen_finished": "2024-06-05T14:56:50.682Z",
    }


def test_message_without_swipes_gets_its_text_as_the_only_swipe():
    first = chats.parse_chat_jsonl(solo_chat()).messages[0]
    assert first.swipes == ["Welcome to the glade."]
    assert first.swipe_id == 0
    assert first.swipe_info == [{}]


def test_hidden_message_extra_and_other_keys():
    chat = chats.parse_chat_jsonl(solo_chat())
    assert [m.hidden for m in chat.messages] == [False, False, False, True, False]
    first = chat.messages[0]
    assert first.extra == {"api": "openai", "model": "gpt-4o", "token_count": 12, "gen_id": 1718000000001}
    assert first.other == {
        "force_avatar": "/thumbnail?type=avatar&file=seraphina.png",
        "original_avatar": "seraphina.png",
        "title": "",
    }
    assert chat.messages[2].extra["token_count"] == 40
    assert chat.messages[1].extra == {}


def test_dates_in_the_solo_chat():
    dates = [m.send_date for m in chats.parse_chat_jsonl(solo_chat()).messages]
    assert dates == [
        datetime(2023, 6, 19, 14, 20, tzinfo=UTC),
        datetime(2024, 7, 12, 1, 31, 37, tzinfo=UTC),
        datetime(2024, 6, 5, 14, 56, 50, 682000, tzinfo=UTC),
        datetime(2024, 7, 12, 1, 31, 37, tzinfo=UTC),
        datetime(2024, 7, 12, 1, 31, 37, 250000, tzinfo=UTC),
    ]
    assert all(date.tzinfo is not None for date in dates)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("June 19, 2023 2:20pm", datetime(2023, 6, 19, 14, 20, tzinfo=UTC)),
        ("June 19, 2023 2:20 PM", datetime(2023, 6, 19, 14, 20, tzinfo=UTC)),
        ("Jun 19, 2023 2:20pm", datetime(2023, 6, 19, 14, 20, tzinfo=UTC)),
        ("December 1, 2023 12:05am", datetime(2023, 12, 1, 0, 5, tzinfo=UTC)),
        ("December 1, 2023 12:05pm", datetime(2023, 12, 1, 12, 5, tzinfo=UTC)),
        (1718000000000, datetime(2024, 6, 10, 6, 13, 20, tzinfo=UTC)),
        (1718000000123, datetime(2024, 6, 10, 6, 13, 20, 123000, tzinfo=UTC)),
        ("1718000000000", datetime(2024, 6, 10, 6, 13, 20, tzinfo=UTC)),
        ("2024-07-12T01:31:37.000Z", datetime(2024, 7, 12, 1, 31, 37, tzinfo=UTC)),
        ("2024-07-12T01:31:37", datetime(2024, 7, 12, 1, 31, 37, tzinfo=UTC)),
        ("2024-07-12T03:31:37+02:00", datetime(2024, 7, 12, 1, 31, 37, tzinfo=UTC)),
        ("2024-7-12@01h31m37s", datetime(2024, 7, 12, 1, 31, 37, tzinfo=UTC)),
        ("2024-6-5 @14h 56m 50s 682ms", datetime(2024, 6, 5, 14, 56, 50, 682000, tzinfo=UTC)),
        ("yesterday", None),
        ("Smarch 3, 2023 2:20pm", None),
        ("June 19, 2023 13:20pm", None),
        ("2024-13-40@01h31m37s", None),
        ("", None),
        (None, None),
        (True, None),
        ({"date": 1}, None),
        (1e30, None),
        ("9" * 400, None),
    ],
)
def test_send_date_formats(value, expected):
    line = message(send_date=value) if value is not None else message()
    if value is None:
        del line["send_date"]
    chat = chats.parse_chat_jsonl(jsonl(HEADER, line))
    assert chat.messages[0].send_date == expected
    assert chat.problems == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("June 19, 2023 2:20pm", datetime(2023, 6, 19, 12, 20, tzinfo=UTC)),
        ("December 1, 2023 12:05am", datetime(2023, 11, 30, 23, 5, tzinfo=UTC)),
        ("2024-7-12@01h31m37s", datetime(2024, 7, 11, 23, 31, 37, tzinfo=UTC)),
        ("2024-07-12T01:31:37", datetime(2024, 7, 11, 23, 31, 37, tzinfo=UTC)),
        ("2024-07-12T01:31:37.000Z", datetime(2024, 7, 12, 1, 31, 37, tzinfo=UTC)),
        ("2024-07-12T03:31:37+02:00", datetime(2024, 7, 12, 1, 31, 37, tzinfo=UTC)),
        ("2024-07-12T01:31:37-05:00", datetime(2024, 7, 12, 6, 31, 37, tzinfo=UTC)),
        (1718000000000, datetime(2024, 6, 10, 6, 13, 20, tzinfo=UTC)),
    ],
)
def test_dates_without_an_offset_are_local_time_of_the_given_zone(value, expected):
    chat = chats.parse_chat_jsonl(jsonl(HEADER, message(send_date=value)), zone=ZoneInfo("Europe/Berlin"))
    assert chat.messages[0].send_date == expected


def test_the_authors_note_is_read_from_chat_metadata():
    assert chats.authors_note(HEADER["chat_metadata"]) == chats.AuthorsNote("Keep it gentle.", 4, "system")
    assert chats.authors_note({"note_prompt": "Be brief.", "note_depth": "2", "note_role": 2}) == (
        chats.AuthorsNote("Be brief.", 2, "assistant")
    )
    assert chats.authors_note({"note_depth": -3, "note_role": 7}) == chats.AuthorsNote("", 0, "system")
    assert chats.authors_note({"note_depth": 10**9}).depth == 999
    assert chats.authors_note({}) == chats.AuthorsNote()


def test_writing_the_authors_note_changes_only_what_differs():
    metadata = {"note_prompt": "Old.", "note_depth": "4", "note_role": 0, "note_interval": 3, "variables": {}}
    same = chats.with_authors_note(metadata, chats.AuthorsNote("Old.", 4, "system"))
    assert same == metadata
    changed = chats.with_authors_note(metadata, chats.AuthorsNote("New.", 1, "user"))
    assert changed == {**metadata, "note_prompt": "New.", "note_depth": 1, "note_role": 1}
    assert chats.with_authors_note({}, chats.AuthorsNote()) == {}
    assert chats.with_authors_note({}, chats.AuthorsNote("Hi.")) == {"note_prompt": "Hi."}


def test_a_narrator_message_is_told_from_a_character_message():
    data = jsonl(
        HEADER,
        message(name="System", mes="Night falls.", extra={"type": "narrator", "api": "manual"}),
        message(name="System", mes="A character called System."),
        message(name="Alex", mes="Odd.", is_user=True, extra={"type": "narrator"}),
    )
    assert [m.is_narrator for m in chats.parse_chat_jsonl(data).messages] == [True, False, False]


def test_group_chat_without_header_takes_names_from_the_messages():
    data = jsonl(
        message(name="SillyTavern System", mes="Group chat started.", is_system=True),
        message(name="Aria", mes="Hi all."),
        message(name="Alex", mes="Hello!", is_user=True),
        message(name="Borin", mes="Ho there."),
    )
    chat = chats.parse_chat_jsonl(data)
    assert chat.user_name == "Alex"
    assert chat.character_name == "Aria"
    assert chat.create_date == ""
    assert chat.chat_metadata == {}
    assert [m.name for m in chat.messages] == ["SillyTavern System", "Aria", "Alex", "Borin"]
    assert chat.problems == []


def test_header_with_only_metadata_still_counts_as_header():
    chat = chats.parse_chat_jsonl(jsonl({"chat_metadata": {"world_info": "Eldoria"}}, message(name="Aria")))
    assert chat.chat_metadata == {"world_info": "Eldoria"}
    assert chat.character_name == "Aria"
    assert len(chat.messages) == 1


def test_bad_lines_are_reported_by_number_and_the_rest_imports():
    data = jsonl(
        HEADER,
        message(mes="one"),
        message(name="Alex", mes="two", is_user=True),
        '{"name": "Seraphina", "mes": "broken" "oops"}',
        "",
        '["not", "a", "message"]',
        {"name": "Seraphina", "is_user": False, "send_date": 1},
        "42",
        message(mes="three"),
    )
    chat = chats.parse_chat_jsonl(data)
    assert [m.mes for m in chat.messages] == ["one", "two", "three"]
    assert len(chat.problems) == 4
    assert chat.problems[0].startswith("line 4: not valid JSON (Expecting ',' delimiter")
    assert chat.problems[1] == "line 6: not a JSON object (it is an array)"
    assert chat.problems[2] == "line 7: a message needs 'mes' or 'swipes'"
    assert chat.problems[3] == "line 8: not a JSON object (it is a single value)"


def test_invalid_first_line_is_a_problem_and_the_rest_are_messages():
    chat = chats.parse_chat_jsonl(jsonl("{oops", message(mes="one")))
    assert chat.problems[0].startswith("line 1: not valid JSON")
    assert [m.mes for m in chat.messages] == ["one"]


@pytest.mark.parametrize("data", [b"", b"\n\n  \n", "", jsonl("nope", "[1]"), jsonl({"name": "x"})])
def test_a_file_without_header_or_messages_is_refused(data):
    with pytest.raises(InteropError, match="no messages: the file has no valid chat lines"):
        chats.parse_chat_jsonl(data)


def test_header_only_file_is_an_empty_chat():
    chat = chats.parse_chat_jsonl(jsonl(HEADER))
    assert chat.messages == []
    assert chat.character_name == "Seraphina"


def test_mes_wins_over_a_different_shown_swipe():
    line = message(mes="Edited text.", swipes=["a", "b", "c"], swipe_id=2)
    got = chats.parse_chat_jsonl(jsonl(HEADER, line)).messages[0]
    assert got.swipes == ["a", "b", "Edited text."]
    assert got.swipe_id == 2
    assert got.mes == "Edited text."


@pytest.mark.parametrize(("swipe_id", "expected_id"), [(7, 2), (-3, 0), ("1", 1), ("x", 0)])
def test_swipe_id_out_of_range_is_clamped_and_mes_is_put_there(swipe_id, expected_id):
    line = message(mes="Shown.", swipes=["a", "b", "c"], swipe_id=swipe_id, swipe_info=[{"n": 1}])
    got = chats.parse_chat_jsonl(jsonl(HEADER, line)).messages[0]
    assert got.swipe_id == expected_id
    assert got.swipes[expected_id] == "Shown."
    assert len(got.swipes) == 3
    assert got.swipe_info == [{"n": 1}, {}, {}]


def test_swipes_without_mes_show_the_swipe_at_swipe_id():
    line = {"name": "Aria", "is_user": False, "swipes": ["a", "b"], "swipe_id": 1}
    got = chats.parse_chat_jsonl(jsonl(HEADER, line)).messages[0]
    assert got.mes == "b"
    assert got.send_date is None


def test_longer_swipe_info_is_cut_to_the_swipes():
    line = message(mes="a", swipes=["a"], swipe_info=[{"n": 1}, {"n": 2}, "junk"])
    assert chats.parse_chat_jsonl(jsonl(HEADER, line)).messages[0].swipe_info == [{"n": 1}]


def test_crlf_bom_and_str_input_are_read():
    text = "\ufeff" + jsonl(HEADER, message(mes="one"), message(mes="two")).decode().replace("\n", "\r\n")
    for data in (text, text.encode("utf-8")):
        chat = chats.parse_chat_jsonl(data)
        assert [m.mes for m in chat.messages] == ["one", "two"]
        assert chat.problems == []


def test_line_separator_inside_a_message_does_not_split_the_line():
    chat = chats.parse_chat_jsonl(jsonl(HEADER, message(mes="before\u2028after\x85end")))
    assert chat.messages[0].mes == "before\u2028after\x85end"
    assert chat.problems == []


def test_non_utf8_bytes_are_refused():
    data = jsonl(HEADER) + "Café".encode("latin-1")
    with pytest.raises(InteropError, match="not UTF-8"):
        chats.parse_chat_jsonl(data)


def test_oversize_file_is_refused():
    data = solo_chat()
    with pytest.raises(InteropError, match="larger than"):
        chats.parse_chat_jsonl(data, max_bytes=len(data) - 1)
    assert chats.parse_chat_jsonl(data, max_bytes=len(data)).messages


# --- export -------------------------------------------------------------------------------------


def test_export_writes_sillytavern_lines():
    out = chats.export_chat_jsonl(chats.parse_chat_jsonl(solo_chat()))
    assert out.endswith(b"\n") and b"\r" not in out
    assert "ünïcödé".encode() in out
    lines = [json.loads(line) for line in out.decode("utf-8").splitlines()]
    assert lines[0] == HEADER
    assert list(lines[0])[:4] == ["user_name", "character_name", "create_date", "chat_metadata"]
    assert len(lines) == 6
    swiped = lines[3]
    assert swiped["mes"] == "Second try."
    assert swiped["swipes"] == ["First try.", "Second try.", "Third try."]
    assert swiped["swipe_id"] == 1
    assert swiped["send_date"] == "2024-06-05T14:56:50.682Z"
    assert swiped["gen_finished"] == "2024-06-05T14:56:50.682Z"
    assert lines[1]["send_date"] == "2023-06-19T14:20:00.000Z"
    assert lines[1]["force_avatar"] == "/thumbnail?type=avatar&file=seraphina.png"
    assert lines[4]["is_system"] is True
    assert lines[1]["swipe_info"] == [{}]


def test_export_of_a_hand_built_chat():
    chat = chats.ChatFile(
        user_name="Alex",
        character_name="Aria",
        messages=[
            chats.ChatMessage(name="Aria", is_user=False, swipes=["x", "y"], swipe_id=9),
            chats.ChatMessage(
                name="Alex",
                is_user=True,
                send_date=datetime(2024, 1, 2, 5, 4, 3, 999999, tzinfo=timezone(timedelta(hours=2))),
            ),
        ],
    )
    lines = [json.loads(line) for line in chats.export_chat_jsonl(chat).splitlines()]
    assert lines[0] == {"user_name": "Alex", "character_name": "Aria", "create_date": "", "chat_metadata": {}}
    assert (lines[1]["mes"], lines[1]["swipe_id"], lines[1]["send_date"]) == ("y", 1, "")
    assert lines[1]["swipe_info"] == [{}, {}]
    assert (lines[2]["mes"], lines[2]["swipes"]) == ("", [""])
    assert lines[2]["send_date"] == "2024-01-02T03:04:03.999Z"


def test_lone_surrogate_is_exported_escaped():
    chat = chats.parse_chat_jsonl(jsonl(HEADER, '{"name": "Aria", "mes": "bad \\ud800 half"}'))
    out = chats.export_chat_jsonl(chat)
    assert b"\\ud800" in out
    assert chats.parse_chat_jsonl(out).messages[0].mes == "bad \ud800 half"


def snapshot(chat: chats.ChatFile) -> tuple:
    return (
        chat.user_name,
        chat.character_name,
        chat.create_date,
        chat.chat_metadata,
        chat.header_other,
        [
            (m.name, m.is_user, m.hidden, m.send_date, m.swipes, m.swipe_id, m.swipe_info, m.extra, m.other)
            for m in chat.messages
        ],
    )


@pytest.mark.parametrize(
    "data",
    [
        solo_chat(),
        jsonl(message(name="Aria", mes="Hi."), message(name="Alex", mes="Yo.", is_user=True, send_date="?")),
    ],
)
def test_round_trip_keeps_everything(data):
    first = chats.parse_chat_jsonl(data)
    second = chats.parse_chat_jsonl(chats.export_chat_jsonl(first))
    assert snapshot(second) == snapshot(first)
    assert second.problems == []
    assert chats.export_chat_jsonl(second) == chats.export_chat_jsonl(first)


def test_round_trip_dates_keep_milliseconds():
    data = jsonl(HEADER, message(send_date="2024-07-12T01:31:37.123456Z"))
    first = chats.parse_chat_jsonl(data).messages[0].send_date
    again = chats.parse_chat_jsonl(chats.export_chat_jsonl(chats.parse_chat_jsonl(data))).messages[0]
    assert first == datetime(2024, 7, 12, 1, 31, 37, 123000, tzinfo=UTC)
    assert again.send_date == first


def test_plain_text_export():
    text = chats.export_chat_text(chats.parse_chat_jsonl(solo_chat()))
    blocks = text.rstrip("\n").split("\n\n")
    assert blocks == [
        "[2023-06-19 14:20 UTC] Seraphina: Welcome to the glade.",
        "[2024-07-12 01:31 UTC] Alex: Where am I? — ünïcödé",
        "[2024-06-05 14:56 UTC] Seraphina: Second try.",
        "[2024-07-12 01:31 UTC] Alex (hidden): (an aside)",
        "[2024-07-12 01:31 UTC] Seraphina: No zone.",
    ]
    assert text.endswith("\n")
    assert "First try." not in text


def test_plain_text_export_without_dates_or_messages():
    chat = chats.parse_chat_jsonl(jsonl({"name": "Aria", "mes": "Line one\nLine two"}))
    assert chats.export_chat_text(chat) == "Aria: Line one\nLine two\n"
    assert chats.export_chat_text(chats.ChatFile(user_name="A", character_name="B")) == ""
