"""Room events: everything a room's members may see goes to the group `room.<id>` after commit.

Host-only data (the Preview, recall detail) never goes here.

When a web process's event loop is known (the room socket binds it), events are handed to an
ordered outbox on that loop instead of being sent from the database thread: rendering and
sending then happen off the path of the request that caused them, and still in order. While a
turn is planned the outbox waits (`hold`): rendering would compete with the planning for the
interpreter. No event waits longer than `HOLD_MAX` for it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from collections.abc import Callable

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db import close_old_connections, transaction

log = logging.getLogger(__name__)

HOLD_MAX = 0.25  # seconds an event may wait for a turn being planned

_loop: asyncio.AbstractEventLoop | None = None
_outboxes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per event loop
_lanes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per event loop: the last direct send


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


class _Outbox:
    """One loop's ordered outbox: events are built in a worker thread and sent one by one."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.queue: asyncio.Queue = asyncio.Queue()
        self.holds = 0
        self.open = asyncio.Event()
        self.open.set()
        # A fresh context: the pump must not inherit the database thread's sync-context markers.
        loop.create_task(self._pump(), context=contextvars.Context())

    async def _pump(self) -> None:
        layer = get_channel_layer()
        this = asyncio.current_task()
        # Not `while True`: sync_to_async swallows a cancel that comes while its thread runs (it
        # waits for the thread and returns), and a loop shutting down cancels only once.
        while not this.cancelling():
            group, factory, queued_at = await self.queue.get()
            wait = queued_at + HOLD_MAX - asyncio.get_running_loop().time()
            if not self.open.is_set() and wait > 0:
                try:
                    await asyncio.wait_for(self.open.wait(), wait)
                except TimeoutError:
                    pass
            # Not the shared database thread: rendering must not queue ahead of the next turn's work.
            event = await sync_to_async(_build, thread_sensitive=False)(factory)
            await layer.group_send(group, event)

    def hold(self) -> Callable[[], None]:
        self.holds += 1
        self.open.clear()
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self.holds -= 1
            if self.holds == 0:
                self.open.set()

        # A hold never outlives HOLD_MAX, whatever happens to the turn that took it.
        asyncio.get_running_loop().call_later(HOLD_MAX, release)
        return release


def _outbox(loop: asyncio.AbstractEventLoop) -> _Outbox:
    box = _outboxes.get(loop)
    if box is None:
        box = _outboxes[loop] = _Outbox(loop)
    return box


def _enqueue(group: str, factory: Callable[[], dict]) -> None:
    loop = asyncio.get_running_loop()
    _outbox(loop).queue.put_nowait((group, factory, loop.time()))


def hold() -> Callable[[], None]:
    """Keep this loop's outbox from building events until the returned release is called.

    Call from async code. Releasing twice is harmless, and a hold ends by itself after HOLD_MAX.
    """
    loop = asyncio.get_running_loop()
    if loop is not _loop:  # events do not go through this loop's outbox: nothing to hold
        return _no_hold
    return _outbox(loop).hold()


def _no_hold() -> None:
    pass


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


def account_closed(user_id: int, room_ids: list[int]) -> None:
    """Close every open socket of a deactivated person, after commit: their sockets to each of
    `room_ids` (as a removal does) and their site sockets (through their per-user group)."""
    from orbchat.consumers import user_group

    text = "Your account was deactivated."

    def push() -> None:
        for room_id in room_ids:
            send(room_id, lambda: {"type": "room.kicked", "user": user_id, "text": text})
        send_to(user_group(user_id), lambda: {"type": "user.closed", "text": text})

    transaction.on_commit(push)


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
    once, not through the outbox: it must reach the room before the reply's first token, which
    does not go through the outbox either (`TokenSender` waits for `direct_sent`).
    """
    _send_direct(room_id, {"type": "memory.recall", "state": state, "count": count})


def _send_direct(room_id: int, event: dict) -> None:
    """Send now, in order with the other direct sends, without waiting for it (from any thread)."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    loop = _loop
    if running is not None:
        _chain(running, room_id, event)
    elif loop is not None and loop.is_running():
        loop.call_soon_threadsafe(_chain, loop, room_id, event, context=contextvars.Context())
    else:
        async_to_sync(get_channel_layer().group_send)(room_group(room_id), event)


def _chain(loop: asyncio.AbstractEventLoop, room_id: int, event: dict) -> None:
    from rooms import relay

    before = _lanes.get(loop)

    async def send() -> None:
        if before is not None:
            await asyncio.gather(before, return_exceptions=True)
        try:
            await relay.publish(room_id, event)
        except Exception:  # one lost event must not stop the ones after it
            log.exception("could not send %s to room %s", event.get("type"), room_id)
        finally:
            if _lanes.get(loop) is task:
                del _lanes[loop]

    task = _lanes[loop] = loop.create_task(send())


async def direct_sent() -> None:
    """Wait until the direct sends handed to this loop so far are out."""
    last = _lanes.get(asyncio.get_running_loop())
    if last is not None:
        await asyncio.gather(last, return_exceptions=True)


def recall_detail(host_id: int, room_id: int, detail: dict) -> None:
    """Send the recall detail to the host's own sockets (their per-user group, never the room's)."""
    from orbchat.consumers import user_group

    send_to(user_group(host_id), lambda: {"type": "user.recall", "room": room_id, "detail": detail})
