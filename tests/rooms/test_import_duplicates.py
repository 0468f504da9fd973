"""Importing a chat that is in the host's chats already: asked on the web, skipped by the command."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from rooms import chatfiles, services
from rooms.models import Room
from tests.rooms.test_views import chat_jsonl

pytestmark = pytest.mark.django_db

LINES = (
    {"name": "Ann", "is_user": True, "mes": "Hi", "swipes": ["Hi"], "swipe_id": 0},
    {"name": "Maren", "is_user": False, "mes": "Welcome.", "swipes": ["Welcome.", "Oh, you."], "swipe_id": 0},
)


@pytest.fixture(autouse=True)
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path


def imported_rooms(character):
    return Room.objects.filter(title=f"{character.name} (imported)")


def post_file(client, character, content: bytes):
    return client.post(
        reverse("rooms:import"),
        {"file": SimpleUploadedFile("chat.jsonl", content), "character": character.pk, "build_memory": ""},
    )


def test_the_same_messages_on_the_same_character_are_a_duplicate(host, character):
    room, _ = chatfiles.chat_import(host=host, character=character, content=chat_jsonl(*LINES))
    with pytest.raises(chatfiles.ChatDuplicate) as caught:
        chatfiles.chat_import(
            host=host, character=character, content=chat_jsonl(*LINES), allow_duplicate=False
        )
    assert caught.value.existing == room
    assert imported_rooms(character).count() == 1


def test_a_continued_chat_is_not_a_duplicate(host, character):
    room, _ = chatfiles.chat_import(host=host, character=character, content=chat_jsonl(*LINES))
    services.message_create(room=room, author=host, text="And then?")
    chatfiles.chat_import(host=host, character=character, content=chat_jsonl(*LINES), allow_duplicate=False)
    assert imported_rooms(character).count() == 2


def test_another_swipe_shown_is_not_a_duplicate(host, character):
    chatfiles.chat_import(host=host, character=character, content=chat_jsonl(*LINES))
    other = (LINES[0], {**LINES[1], "mes": "Oh, you.", "swipe_id": 1})
    chatfiles.chat_import(host=host, character=character, content=chat_jsonl(*other), allow_duplicate=False)
    assert imported_rooms(character).count() == 2


def test_the_web_import_asks_then_skip_imports_nothing(signed_in, character):
    assert post_file(signed_in, character, chat_jsonl(*LINES)).status_code == 302
    response = post_file(signed_in, character, chat_jsonl(*LINES))
    page = response.content.decode()
    assert "is already in your chats — import as a copy, or skip?" in page
    assert imported_rooms(character).count() == 1
    token = re.search(r'name="token" value="([^"]+)"', page).group(1)
    response = signed_in.post(
        reverse("rooms:import_resolve"), {"token": token, "action": "skip"}, follow=True
    )
    assert "skipped, nothing imported" in response.content.decode()
    assert imported_rooms(character).count() == 1


def test_the_web_import_copies_when_asked(signed_in, character):
    post_file(signed_in, character, chat_jsonl(*LINES))
    token = re.search(
        r'name="token" value="([^"]+)"', post_file(signed_in, character, chat_jsonl(*LINES)).content.decode()
    ).group(1)
    response = signed_in.post(reverse("rooms:import_resolve"), {"token": token, "action": "copy"})
    copy = imported_rooms(character).order_by("-pk").first()
    assert response["Location"] == reverse("rooms:room", args=[copy.pk])
    assert imported_rooms(character).count() == 2


def test_the_command_skips_a_duplicate_chat_unless_told_to_copy(host, character, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_bytes(chat_jsonl(*LINES))
    args = ("import_sillytavern", str(path), "--user", host.username, "--character", str(character.pk))
    call_command(*args, stdout=StringIO())
    out = StringIO()
    call_command(*args, stdout=out)
    room = imported_rooms(character).get()
    assert (
        out.getvalue().strip() == f"skipped {path}: “{room.title}” is already in your chats (chat {room.pk})"
    )
    call_command(*args, "--on-duplicate", "copy", stdout=StringIO())
    assert imported_rooms(character).count() == 2
