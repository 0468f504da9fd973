"""One channel-layer subscription per room per web process, fanned out in memory.

Without this every open tab is its own channel: a token for a room with 20 tabs becomes 20
Redis messages, each popped with its own round trip, and streams fall behind. With it, a
room event crosses Redis once per web process and reaches that process's tabs in memory.

Events made in this process for its own tabs (a reply's tokens, what recall is doing) do not
wait for Redis at all: the event bus (`rooms.events`) hands them to this process's tabs at once
(`hand_over_here`) and sends them across Redis only for the tabs of other processes, marked so
that this process's relay skips its echo.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref

from channels.consumer import get_handler_name
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)

# Marks the room events this process has already handed to its own tabs (`hand_over_here`).
PROCESS = uuid.uuid4().hex


def room_group(room_id: int) -> str:
    """Return the room's group: what every member of the room may see."""
    return f"room.{room_id}"


class _Relay:
    def __init__(self, room_id: int) -> None:
        self.room_id = room_id
        self.consumers: set = set()
        self.channel: str | None = None
        self.task: asyncio.Task | None = None
        self.ready = asyncio.Event()

    async def start(self) -> None:
        layer = get_channel_layer()
        self.channel = await layer.new_channel()
        await layer.group_add(room_group(self.room_id), self.channel)
        self.task = asyncio.create_task(self._pump(layer))
        self.ready.set()

    async def _pump(self, layer) -> None:
        while True:
            event = await layer.receive(self.channel)
            if event.get("origin") != PROCESS:  # this process's own were handed over already
                await self.hand_over(event)

    async def hand_over(self, event: dict) -> None:
        """Give the event to every tab of the room in this process."""
        name = get_handler_name(event)
        for consumer in list(self.consumers):
            # The handler itself, not consumer.dispatch(): dispatch first closes stale DB
            # connections through a thread hop, which per token per tab is the whole cost.
            try:
                await getattr(consumer, name)(event)
            except Exception:  # one broken tab must not stop the others' stream
                log.exception("room %s: a socket failed to take an event", self.room_id)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            # Let the cancelled receive clean up its Redis connection before it is used again.
            await asyncio.gather(self.task, return_exceptions=True)
        if self.channel is not None:
            await get_channel_layer().group_discard(room_group(self.room_id), self.channel)


# Per event loop (one per daphne process; one per test): a loop that is gone takes its relays
# with it. Keyed by the loop object, not its id(), which a later loop may reuse.
_relays: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, _Relay]] = weakref.WeakKeyDictionary()


def _loop_relays() -> dict[int, _Relay]:
    loop = asyncio.get_running_loop()
    relays = _relays.get(loop)
    if relays is None:
        relays = _relays[loop] = {}
    return relays


async def join(room_id: int, consumer) -> None:
    relays = _loop_relays()
    relay = relays.get(room_id)
    if relay is None:
        relay = relays[room_id] = _Relay(room_id)
        relay.consumers.add(consumer)
        await relay.start()
    else:
        relay.consumers.add(consumer)
        await relay.ready.wait()


async def leave(room_id: int, consumer) -> None:
    relays = _loop_relays()
    relay = relays.get(room_id)
    if relay is None:
        return
    relay.consumers.discard(consumer)
    if not relay.consumers:
        del relays[room_id]
        await relay.stop()


def drop(room_id: int, consumer) -> None:
    """Stop handing the room's events to `consumer` (a socket being closed); `leave` still
    follows from its disconnect. Safe from inside the relay's own hand-over."""
    relay = _loop_relays().get(room_id)
    if relay is not None:
        relay.consumers.discard(consumer)


async def hand_over_here(room_id: int, event: dict) -> bool:
    """Give a room event to this process's tabs of the room at once; False when it has none yet."""
    relay = _loop_relays().get(room_id)
    if relay is None or not relay.ready.is_set():
        return False
    await relay.hand_over(event)
    return True
