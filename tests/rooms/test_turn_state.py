"""What a turn's prompt changes is kept for the next: world-info timers and chat variables."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from orbchat.interop import chats
from orbchat.library.models import WorldBook, WorldEntry
from rooms import chatfiles, services
from rooms.models import Room
from tests.fakes.llm import Reply
from tests.rooms.test_turns import done_message, open_socket, settle, until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


async def say(host, room, fake_llm, text: str) -> str:
    """Send `text`, wait for the reply, and return everything the provider was sent."""
    fake_llm.script(Reply("Noted."))
    socket = await open_socket(host, room.pk)
    await socket.send_json_to({"type": "send", "text": text})
    await until(socket, done_message)
    await settle()
    await socket.disconnect()
    return "\n".join(m["content"] for m in fake_llm.requests[-1].body["messages"])


@sync_to_async
def exported_variables(room) -> dict:
    lines = chats.export_chat_jsonl(chatfiles.chat_file(Room.objects.get(pk=room.pk))).decode().splitlines()
    return json.loads(lines[0])["chat_metadata"]["variables"]


async def test_a_sticky_entry_stays_in_the_prompt_for_the_next_messages(room, host, connected, fake_llm):
    @sync_to_async
    def lore():
        book = WorldBook.objects.create(owner=host, name="Harbour", scan_depth=1)
        WorldEntry.objects.create(
            book=book, uid=1, keys=["lantern"], content="The lantern is cursed.", sticky=3
        )
        room.world_books.add(book)

    await lore()
    assert "The lantern is cursed." in await say(host, room, fake_llm, "I light the lantern.")
    # The key is no longer in the scanned message, but the entry sticks for three messages.
    assert "The lantern is cursed." in await say(host, room, fake_llm, "We walk on.")


async def test_variables_set_by_the_greeting_and_the_note_reach_the_prompt_and_the_export(
    host, connected, fake_llm
):
    @sync_to_async
    def make_room():
        character = host.characters.get()
        character.first_mes = "{{setvar::hp::100}}*She waves.*"
        character.save()
        room = services.room_create_from_character(host=host, character=character)
        # A line's getvars run before its addvar (as in SillyTavern): the count reads on the next line.
        room.authors_note = "{{addvar::turns::1}}\nHP {{getvar::hp}}, turn {{getvar::turns}}."
        room.save()
        return room

    room = await make_room()
    first = await say(host, room, fake_llm, "Hello.")
    assert "HP 100, turn 1." in first and "setvar" not in first
    assert "HP 100, turn 2." in await say(host, room, fake_llm, "Again.")
    assert await exported_variables(room) == {"hp": "100", "turns": 2}
