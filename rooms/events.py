"""Room events: everything a room's members may see goes to the group `room.<id>` after commit.

Host-only data (the Preview, recall detail) never goes here.

When a web process's event loop is known (the room socket binds it), events are handed to an
ordered outbox on that loop instead of being sent from the database thread: rendering and
sending then happen off the path of the request that caused them, and still in order.
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections.abc import Callable

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db import close_old_connections, transaction

_loop: asyncio.AbstractEventLoop | None = None
_outboxes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per event loop


def room_group(room_id: int) -> str:
    return f"room.{room_id}"


def bind_loop() -> None:
    """Remember the running loop (call from async code): later events go through its outbox."""
    global _loop
    _loop = asyncio.get_running_loop()


def _build(factory: Callable[[], dict]) -> dict:
    """Run an event factory in a worker thread with its own, closed-after database connection."""
    close_old_connections()
    try:
        return factory()
    finally:
        close_old_connections()


async def _pump(queue: asyncio.Queue) -> None:
    layer = get_channel_layer()
    while True:
        group, factory = await queue.get()
        # Not the shared database thread: rendering must not queue ahead of the next turn's work.
        event = await sync_to_async(_build, thread_sensitive=False)(factory)
        await layer.group_send(group, event)


def _enqueue(group: str, factory: Callable[[], dict]) -> None:
    loop = asyncio.get_running_loop()
    queue = _outboxes.get(loop)
    if queue is None:
        queue = _outboxes[loop] = asyncio.Queue()
        # A fresh context: the pump must not inherit the database thread's sync-context markers.
        loop.create_task(_pump(queue), context=contextvars.Context())
    queue.put_nowait((group, factory))


def send(room_id: int, factory: Callable[[], dict]) -> None:
    send_to(room_group(room_id), factory)


def send_to(group: str, factory: Callable[[], dict]) -> None:
    """Send an event to a group, in order with the others sent from this process."""
    loop = _loop
    if loop is not None and loop.is_running() and not _in_loop_thread(loop):
        loop.call_soon_threadsafe(_enqueue, group, factory, context=contextvars.Context())
    else:
        async_to_sync(get_channel_layer().group_send)(group, factory())


def _in_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _after_commit(room_id: int, factory: Callable[[], dict]) -> None:
    transaction.on_commit(lambda: send(room_id, factory))


def message_added(message) -> None:
    message_changed(message, created=True)


def message_changed(message, *, created: bool = False) -> None:
    """Send the message's rendered HTML (the same partial the page renders)."""
    room_id, message_id, seq = message.room_id, message.pk, message.seq

    def event() -> dict:
        from rooms.models import Message
        from rooms.presenters import message_html

        fresh = Message.objects.filter(pk=message_id).first()
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


def people_changed(room_id: int, text: str, *, reload: bool = False) -> None:
    """Tell the room that its people changed (joined, left, removed, new host)."""
    _after_commit(room_id, lambda: {"type": "room.people", "text": text, "reload": reload})


def member_removed(room_id: int, user_id: int) -> None:
    """Close the removed person's sockets to this room (their consumers match the user id)."""
    _after_commit(room_id, lambda: {"type": "room.kicked", "user": user_id})


def seats_changed(room_id: int) -> None:
    _after_commit(room_id, lambda: {"type": "room.people", "text": "", "reload": False})


def user_notice(user_id: int, text: str) -> None:
    """Send a notice to every open tab of one user (their site socket), after commit."""
    from orbchat.consumers import user_group

    def push() -> None:
        async_to_sync(get_channel_layer().group_send)(
            user_group(user_id), {"type": "user.notice", "text": text}
        )

    transaction.on_commit(push)


def memory_recall(room_id: int, *, state: str, count: int = 0) -> None:
    """Tell the room what memory is doing: "recalling", then "done" with the count, or "off".

    Only the count: which memories and how they scored is host-only (`recall_detail`). Sent at
    once, not through the outbox, from the turn's database thread: it must reach the room before
    the reply's first token, which does not go through the outbox either.
    """
    async_to_sync(get_channel_layer().group_send)(
        room_group(room_id), {"type": "memory.recall", "state": state, "count": count}
    )


def recall_detail(host_id: int, room_id: int, detail: dict) -> None:
    """Send the recall detail to the host's own sockets (their per-user group, never the room's)."""
    from orbchat.consumers import user_group

    send_to(user_group(host_id), lambda: {"type": "user.recall", "room": room_id, "detail": detail})
