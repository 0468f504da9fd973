"""Room events: everything a room's members may see goes to the group `room.<id>` after commit.

Host-only data (the Preview, recall detail) never goes here.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction


def room_group(room_id: int) -> str:
    return f"room.{room_id}"


def send_now(room_id: int, event: dict) -> None:
    async_to_sync(get_channel_layer().group_send)(room_group(room_id), event)


def _after_commit(room_id: int, event_factory) -> None:
    transaction.on_commit(lambda: send_now(room_id, event_factory()))


def message_added(message) -> None:
    message_changed(message, created=True)


def message_changed(message, *, created: bool = False) -> None:
    """Send the message's rendered HTML (the same partial the page renders)."""
    from rooms.presenters import message_html

    room_id, message_id, seq = message.room_id, message.pk, message.seq

    def event() -> dict:
        from rooms.models import Message

        fresh = Message.objects.filter(pk=message_id).select_related("room").first()
        if fresh is None:
            return {"type": "room.removed", "ids": [message_id]}
        return {
            "type": "room.message",
            "id": message_id,
            "seq": seq,
            "created": created,
            "html": message_html(fresh),
        }

    _after_commit(room_id, event)


def messages_removed(room_id: int, ids: list[int]) -> None:
    _after_commit(room_id, lambda: {"type": "room.removed", "ids": ids})
