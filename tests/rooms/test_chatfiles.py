from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from orbchat.interop import chats
from orbchat.library.models import WorldBook
from rooms import chatfiles, services
from rooms.models import Message
from tests.factories import make_user

pytestmark = pytest.mark.django_db

METADATA = {
    "note_prompt": "Keep the weather grim.",
    "note_interval": 2,
    "note_position": 1,
    "note_depth": 6,
    "note_role": 1,
    "world_info": "Harbour Lore",
    "variables": {"coins": "12", "met_keeper": "true"},
    "timedWorldInfo": {"sticky": {"lighthouse": {"end": 9, "protected": False}}, "cooldown": {}},
    "tainted": True,
}
HEADER = {
    "user_name": "Ann",
    "character_name": "Maren",
    "create_date": "2024-07-12@01h31m37s",
    "chat_metadata": METADATA,
    "integrity": "9b1e-44",
}
LINES = [
    {
        "name": "Maren",
        "is_user": False,
        "is_system": False,
        "send_date": "July 12, 2024 1:31am",
        "mes": "The harbour is quiet tonight.",
        "swipes": ["The harbour is quiet tonight."],
        "swipe_id": 0,
        "swipe_info": [{"send_date": "July 12, 2024 1:31am", "gen_started": None, "extra": {}}],
        "extra": {},
        "force_avatar": "/thumbnail?type=avatar&file=maren.png",
        "original_avatar": "maren.png",
    },
    {
        "name": "Ann",
        "is_user": True,
        "is_system": False,
        "send_date": "2024-07-12T01:32:05.120Z",
        "mes": "Any ships?",
        "swipes": ["Any ships?"],
        "swipe_id": 0,
        "swipe_info": [{}],
        "extra": {"isSmallSys": False},
        "force_avatar": "User Avatars/ann.png",
    },
    {
        "name": "Maren",
        "is_user": False,
        "is_system": False,
        "send_date": "2024-07-12T01:33:10.500Z",
        "mes": "One, flying no flag.",
        "swipes": ["None at all.", "One, flying no flag.", "The fog hides them."],
        "swipe_id": 1,
        "swipe_info": [
            {
                "send_date": "2024-07-12T01:32:40.000Z",
                "gen_started": "2024-07-12T01:32:38.000Z",
                "gen_finished": "2024-07-12T01:32:40.000Z",
                "extra": {"api": "openai", "model": "gpt-4o-mini", "token_count": 4},
            },
            {
                "send_date": "2024-07-12T01:33:10.500Z",
                "gen_started": "2024-07-12T01:33:07.250Z",
                "gen_finished": "2024-07-12T01:33:10.500Z",
                "extra": {"api": "openai", "model": "gpt-4o", "token_count": 6, "reasoning": "Ships."},
            },
            {
                "send_date": "2024-07-12T01:34:00.000Z",
                "gen_started": "2024-07-12T01:33:58.000Z",
                "gen_finished": "2024-07-12T01:34:00.000Z",
                "extra": {"api": "claude", "model": "claude-3-haiku", "token_count": 5},
            },
        ],
        "gen_started": "2024-07-12T01:33:07.250Z",
        "gen_finished": "2024-07-12T01:33:10.500Z",
        "extra": {"api": "openai", "model": "gpt-4o", "token_count": 6, "reasoning": "Ships."},
        "force_avatar": "/thumbnail?type=avatar&file=maren.png",
    },
    {
        "name": "System",
        "is_user": False,
        "is_system": False,
        "send_date": "2024-07-12T01:34:30.000Z",
        "mes": "A bell rings somewhere in the fog.",
        "swipes": ["A bell rings somewhere in the fog."],
        "swipe_id": 0,
        "swipe_info": [{}],
        "force_avatar": "img/five.png",
        "extra": {
            "type": "narrator",
            "bias": None,
            "gen_id": 1720748070000,
            "isSmallSys": False,
            "api": "manual",
            "model": "slash command",
        },
    },
    {
        "name": "Ann",
        "is_user": True,
        "is_system": True,
        "send_date": "2024-07-12T01:35:00.000Z",
        "mes": "(note to self: ask about the bell)",
        "swipes": ["(note to self: ask about the bell)"],
        "swipe_id": 0,
        "swipe_info": [{}],
        "extra": {},
    },
]


def chat_jsonl(header: dict | None = HEADER, lines: list[dict] = LINES) -> bytes:
    return ("\n".join(json.dumps(x) for x in ([header] if header else []) + lines) + "\n").encode()


def exported(room) -> list[dict]:
    return [json.loads(line) for line in chats.export_chat_jsonl(chatfiles.chat_file(room)).splitlines()]


def test_round_trip_gives_back_every_field_sillytavern_reads(host, character):
    WorldBook.objects.create(owner=host, name="Harbour Lore")
    room, problems = chatfiles.chat_import(host=host, character=character, content=chat_jsonl())
    assert problems == []
    header, *lines = exported(room)
    assert header == HEADER
    assert len(lines) == len(LINES)
    for number, (came, went) in enumerate(zip(LINES, lines, strict=True), start=1):
        for key in sorted(set(came) | set(went)):
            if key == "send_date":
                # Normalised: written as the same moment in ISO UTC.
                assert chats.parse_send_date(went[key]) == chats.parse_send_date(came[key]), (number, key)
            else:
                assert went.get(key) == came.get(key), (number, key)


def test_the_authors_note_and_lorebook_of_the_chat_are_used(host, character):
    book = WorldBook.objects.create(owner=host, name="Harbour Lore")
    WorldBook.objects.create(owner=host, name="Other Lore")
    room, _ = chatfiles.chat_import(host=host, character=character, content=chat_jsonl())
    assert (room.authors_note, room.authors_note_depth, room.authors_note_role) == (
        "Keep the weather grim.",
        6,
        "user",
    )
    assert list(room.world_books.all()) == [book]


def test_a_lorebook_of_someone_else_is_not_linked(host, character):
    stranger = make_user(actor=host, username="stranger")
    WorldBook.objects.create(owner=stranger, name="Harbour Lore")
    room, _ = chatfiles.chat_import(host=host, character=character, content=chat_jsonl())
    assert not room.world_books.exists()
    assert exported(room)[0]["chat_metadata"]["world_info"] == "Harbour Lore"


def test_a_changed_authors_note_is_exported_over_the_files(host, character):
    room, _ = chatfiles.chat_import(host=host, character=character, content=chat_jsonl())
    room.authors_note, room.authors_note_depth, room.authors_note_role = "Sunny now.", 2, "assistant"
    room.save()
    metadata = exported(room)[0]["chat_metadata"]
    assert metadata == {**METADATA, "note_prompt": "Sunny now.", "note_depth": 2, "note_role": 2}


def test_showing_another_swipe_exports_that_swipes_extra_and_date(host, character):
    room, _ = chatfiles.chat_import(host=host, character=character, content=chat_jsonl())
    room.messages.filter(seq=2).update(active_index=2)
    line = exported(room)[3]
    assert line["mes"] == "The fog hides them."
    assert line["extra"] == LINES[2]["swipe_info"][2]["extra"]
    assert line["send_date"] == "2024-07-12T01:34:00.000Z"
    assert line["swipe_info"] == LINES[2]["swipe_info"]


def test_a_narrator_message_becomes_the_rooms_narrator(host, character):
    room, _ = chatfiles.chat_import(host=host, character=character, content=chat_jsonl())
    narrator = room.messages.get(seq=3)
    assert narrator.kind == Message.Kind.CHARACTER
    assert narrator.seat is None
    assert narrator.speaker_name == services.NARRATOR
    assert room.messages.get(seq=2).seat == room.seats.get()


def test_swipes_keep_their_model_and_generation_times(host, character):
    room, _ = chatfiles.chat_import(host=host, character=character, content=chat_jsonl())
    variants = list(room.messages.get(seq=2).variants.order_by("index"))
    assert [v.model for v in variants] == ["gpt-4o-mini", "gpt-4o", "claude-3-haiku"]
    assert variants[1].started_at == datetime(2024, 7, 12, 1, 33, 7, 250000, tzinfo=UTC)
    assert variants[1].finished_at == datetime(2024, 7, 12, 1, 33, 10, 500000, tzinfo=UTC)


def test_dates_without_an_offset_are_read_in_the_servers_time_zone(host, character, settings):
    settings.TIME_ZONE = "America/New_York"
    room, _ = chatfiles.chat_import(host=host, character=character, content=chat_jsonl())
    first, second = room.messages.order_by("seq")[:2]
    assert first.created_at == datetime(2024, 7, 12, 5, 31, tzinfo=UTC)
    assert second.created_at == datetime(2024, 7, 12, 1, 32, 5, 120000, tzinfo=UTC)


def test_a_chat_without_a_header_exports_the_rooms_names(host, character):
    room, _ = chatfiles.chat_import(host=host, character=character, content=chat_jsonl(header=None))
    header = exported(room)[0]
    assert header["user_name"] == "Ann"
    assert header["character_name"] == "Maren"
    assert header["chat_metadata"] == {}
