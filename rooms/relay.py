"""One channel-layer subscription per room per web process, fanned out in memory.

Without this every open tab is its own channel: a token for a room with 20 tabs becomes 20
Redis messages, each popped with its own round trip, and streams fall behind. With it, a
room event crosses Redis once per web process and reaches that process's tabs in memory.
"""

from __future__ import annotations

import asyncio
import logging

from channels.consumer import get_handler_name
from channels.layers import get_channel_layer

from rooms.events import room_group

log = logging.getLogger(__name__)


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


# Keyed by event loop as well: each loop (one per daphne process; one per test) has its own.
_relays: dict[tuple[int, int], _Relay] = {}


async def join(room_id: int, consumer) -> None:
    key = (id(asyncio.get_running_loop()), room_id)
    relay = _relays.get(key)
    if relay is None:
        relay = _relays[key] = _Relay(room_id)
        relay.consumers.add(consumer)
        await relay.start()
    else:
        relay.consumers.add(consumer)
        await relay.ready.wait()


async def leave(room_id: int, consumer) -> None:
    key = (id(asyncio.get_running_loop()), room_id)
    relay = _relays.get(key)
    if relay is None:
        return
    relay.consumers.discard(consumer)
    if not relay.consumers:
        del _relays[key]
        await relay.stop()
