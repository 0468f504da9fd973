"""Message size limits: every path that writes a message's text refuses an empty or oversized one."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.urls import reverse

from rooms import services
from rooms.models import Message
from tests.rooms.test_turns import open_socket, settle, until


def shown_text(message: Message) -> str:
    message = Message.objects.get(pk=message.pk)
    return message.variants.get(index=message.active_index).text


@pytest.mark.django_db
def test_a_huge_edit_is_refused_and_the_room_page_stays_small(client, room, host):
    client.force_login(host)
    message = services.message_create(room=room, author=host, text="A short line.")
    response = client.post(
        reverse("rooms:message_edit", args=[room.pk, message.pk]), {"text": "x" * 15_000_000}
    )
    assert response.status_code == 409
    assert response.json()["error"] == (
        "Messages are limited to 100,000 characters (this one has 15,000,000)."
    )
    assert shown_text(message) == "A short line."
    page = client.get(reverse("rooms:room", args=[room.pk]))
    assert page.status_code == 200 and len(page.content) < 500_000


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["", "   \n\t  "])
def test_an_empty_edit_is_refused(client, room, host, text):
    client.force_login(host)
    message = services.message_create(room=room, author=host, text="Keep me.")
    response = client.post(reverse("rooms:message_edit", args=[room.pk, message.pk]), {"text": text})
    assert response.status_code == 409
    assert response.json()["error"] == "A message cannot be empty."
    assert shown_text(message) == "Keep me."


@pytest.mark.django_db
def test_a_message_at_the_limit_is_accepted_and_one_over_is_refused(room, host):
    limit = settings.MAX_MESSAGE_CHARS
    at_limit = services.message_create(room=room, author=host, text="y" * limit)
    assert len(shown_text(at_limit)) == limit
    services.message_edit(message=at_limit, text="z" * limit)
    assert shown_text(at_limit) == "z" * limit
    with pytest.raises(services.ActionRefused, match=f"this one has {limit + 1:,}"):
        services.message_create(room=room, author=host, text="y" * (limit + 1))


@pytest.mark.django_db
def test_the_limit_comes_from_the_setting(room, host, settings):
    settings.MAX_MESSAGE_CHARS = 10
    with pytest.raises(services.ActionRefused, match="limited to 10 characters"):
        services.message_create(room=room, author=host, text="eleven char")


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_an_oversized_send_is_a_notice_to_the_sender_and_the_socket_stays_open(room, host):
    socket = await open_socket(host, room.pk)
    await socket.send_json_to({"type": "send", "text": "w" * (settings.MAX_MESSAGE_CHARS + 5)})
    notice, _ = await until(socket, lambda f: f["type"] == "notice")
    assert notice["text"] == "Messages are limited to 100,000 characters (this one has 100,005)."
    await socket.send_json_to({"type": "stop"})
    assert await socket.receive_nothing(timeout=0.3)
    await settle()
    assert await sync_to_async(Message.objects.filter(room=room).count)() == 1  # the greeting only
    await socket.disconnect()
