"""The event bus: the only way an event leaves for a socket.

An event goes to one of two kinds of group. A room's (`room.<id>`) carries what every member
may see: `ROOM_EVENTS`. A person's (`user.<id>`) carries what is for them alone, such as the
host's recall detail and why a reply failed: `USER_EVENTS`. `to_room` refuses (raises
`EventRefused`) a person's event or one of a type it does not know, so host-only data cannot
reach a room by mistake; `to_user` refuses anything but a person's event.

Each way of sending keeps its own timing:
- `to_room`, `to_user`: after commit (unless `on_commit=False`), in order with the others sent
  from this process. When a web process's event loop is known (the room socket binds it), they
  are handed to an ordered outbox on that loop instead of being sent from the database thread:
  building an event (rendering a message) and sending it then happen off the path of the request
  that caused it, and still in order. While a turn is planned the outbox waits (`held`):
  rendering would compete with the planning for the interpreter. No event waits longer than
  `HOLD_MAX` for it. An event may be given as a function that builds it in the outbox.
- `to_user_now`: after commit, sent at once from the calling thread, not through the outbox.
- `to_room_direct`: at once from any thread, in order with the other direct sends, to this
  process's tabs first: what recall is doing must reach the room before the reply's first token.
- From the event loop: `ato_room` and `ato_user` send at once; `ato_tokens` sends a reply's
  tokens after the direct sends so far, to this process's tabs first (`rooms.relay`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import weakref
from collections.abc import AsyncIterator, Callable

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db import close_old_connections, transaction

from orbchat.consumers import user_group
from rooms import relay
from rooms.models import Message
from rooms.presenters import message_html
from rooms.relay import room_group

log = logging.getLogger(__name__)

HOLD_MAX = 0.25  # seconds an event may wait for a turn being planned

# What every member of a room may see.
ROOM_EVENTS = frozenset(
    {
        "room.message",
        "room.removed",
        "room.token",
        "room.notice",
        "room.people",
        "room.online",
        "room.kicked",
        "memory.recall",
    }
)
# What is for one person alone: the host's recall detail and failure reasons, their notices and
# the progress of their background work (a room's memory cycle too), their sockets being closed.
USER_EVENTS = frozenset({"user.notice", "user.recall", "user.progress", "user.memory", "user.closed"})

Event = dict | Callable[[], dict]

_loop: asyncio.AbstractEventLoop | None = None
_outboxes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per event loop
_lanes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # per event loop: the last direct send


class EventRefused(ValueError):
    """An event of a type its group may not carry."""


def _checked(event: dict, allowed: frozenset[str], group: str) -> dict:
    kind = event.get("type")
    if kind in allowed:
        return event
    if kind in USER_EVENTS:
        raise EventRefused(f"{kind!r} is for one person alone: send it with to_user, never to a room.")
    raise EventRefused(f"{kind!r} is not an event a {group} group carries.")


def _builder(event: Event, allowed: frozenset[str], group: str) -> Callable[[], dict]:
    """Return a function that builds the event and checks its type (at once, for a ready event)."""
    if callable(event):
        return lambda: _checked(event(), allowed, group)
    _checked(event, allowed, group)
    return lambda: event


def to_room(room_id: int, event: Event, *, on_commit: bool = True) -> None:
    """Send an event every member of the room may see, in order with the others from this process."""
    _send(room_group(room_id), _builder(event, ROOM_EVENTS, "room"), on_commit=on_commit)


def to_user(user_id: int, event: Event, *, on_commit: bool = True) -> None:
    """Send an event to one person's open tabs, in order with the others from this process."""
    _send(user_group(user_id), _builder(event, USER_EVENTS, "user"), on_commit=on_commit)


def to_user_now(user_id: int, event: dict, *, on_commit: bool = True) -> None:
    """Send an event to one person's open tabs from this thread, not through the outbox."""
    group, event = user_group(user_id), _checked(event, USER_EVENTS, "user")

    def push() -> None:
        async_to_sync(get_channel_layer().group_send)(group, event)

    if on_commit:
        transaction.on_commit(push)
    else:
        push()


async def ato_room(room_id: int, event: dict) -> None:
    """Send an event every member of the room may see, now (from the event loop)."""
    await get_channel_layer().group_send(room_group(room_id), _checked(event, ROOM_EVENTS, "room"))


async def ato_user(user_id: int, event: dict) -> None:
    """Send an event to one person's open tabs, now (from the event loop)."""
    await get_channel_layer().group_send(user_group(user_id), _checked(event, USER_EVENTS, "user"))


async def ato_tokens(room_id: int, event: dict) -> None:
    """Send a reply's tokens: after the direct sends so far, to this process's tabs first."""
    await direct_sent()  # the room hears what recall did before any token
    await _publish(room_id, _checked(event, ROOM_EVENTS, "room"))


async def _publish(room_id: int, event: dict) -> None:
    """Send a room event to every tab: this process's at once, the others' through Redis."""
    if await relay.hand_over_here(room_id, event):
        event = {**event, "origin": relay.PROCESS}
    await get_channel_layer().group_send(room_group(room_id), event)


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
            try:
                # Not the shared database thread: rendering must not queue ahead of the next turn's work.
                event = await sync_to_async(_build, thread_sensitive=False)(factory)
            except Exception:  # one event that cannot be built must not stop the ones after it
                log.exception("could not build an event for %s", group)
                continue
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


@contextlib.asynccontextmanager
async def held() -> AsyncIterator[None]:
    """Keep this loop's outbox from building events while the block runs (HOLD_MAX at most)."""
    release = hold()
    try:
        yield
    finally:
        release()


def _send(group: str, factory: Callable[[], dict], *, on_commit: bool) -> None:
    if on_commit:
        transaction.on_commit(lambda: _to_outbox(group, factory))
    else:
        _to_outbox(group, factory)


def _to_outbox(group: str, factory: Callable[[], dict]) -> None:
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


def to_room_direct(room_id: int, event: dict) -> None:
    """Send now, in order with the other direct sends, without waiting for it (from any thread)."""
    event = _checked(event, ROOM_EVENTS, "room")
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
    before = _lanes.get(loop)

    async def send() -> None:
        if before is not None:
            await asyncio.gather(before, return_exceptions=True)
        try:
            await _publish(room_id, event)
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


# The room's events ----------------------------------------------------------------------------


def message_added(message) -> None:
    message_changed(message, created=True)


def message_changed(message, *, created: bool = False) -> None:
    """Send the message's rendered HTML (the same partial the page renders)."""
    room_id, message_id, seq = message.room_id, message.pk, message.seq

    def event() -> dict:
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

    to_room(room_id, event)


def messages_removed(room_id: int, ids: list[int]) -> None:
    to_room(room_id, {"type": "room.removed", "ids": ids})


def people_changed(room_id: int, text: str, *, reload: bool = False) -> None:
    """Tell the room that its people changed (joined, left, removed, new host)."""
    to_room(room_id, {"type": "room.people", "text": text, "reload": reload})


def member_removed(room_id: int, user_id: int) -> None:
    """Close the removed person's sockets to this room (their consumers match the user id)."""
    to_room(room_id, {"type": "room.kicked", "user": user_id})


def account_closed(user_id: int, room_ids: list[int]) -> None:
    """Close every open socket of a deactivated person, after commit: their sockets to each of
    `room_ids` (as a removal does) and their site sockets (through their per-user group)."""
    text = "Your account was deactivated."
    for room_id in room_ids:
        to_room(room_id, {"type": "room.kicked", "user": user_id, "text": text})
    to_user(user_id, {"type": "user.closed", "text": text})


def seats_changed(room_id: int) -> None:
    to_room(room_id, {"type": "room.people", "text": "", "reload": False})


def user_notice(user_id: int, text: str) -> None:
    """Send a notice to every open tab of one user (their site socket), after commit."""
    to_user_now(user_id, {"type": "user.notice", "text": text})


def memory_recall(room_id: int, *, state: str, count: int = 0) -> None:
    """Tell the room what memory is doing: "recalling", then "done" with the count, or "off".

    Only the count: which memories and how they scored is host-only (`recall_detail`). Sent at
    once, not through the outbox: it must reach the room before the reply's first token, which
    does not go through the outbox either (`ato_tokens` waits for `direct_sent`).
    """
    to_room_direct(room_id, {"type": "memory.recall", "state": state, "count": count})


def recall_detail(host_id: int, room_id: int, detail: dict) -> None:
    """Send the recall detail to the host's own sockets (their per-user group, never the room's)."""
    to_user(host_id, {"type": "user.recall", "room": room_id, "detail": detail}, on_commit=False)
