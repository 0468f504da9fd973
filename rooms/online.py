"""Who is in a room right now: a count of open room sockets per user, kept in Redis.

Every web node shares it, so the list is right behind a load balancer. Each change is sent to
the room group as the ids of the people online (what every member may see anyway).
"""

from __future__ import annotations

from channels.layers import get_channel_layer

from rooms.events import room_group
from rooms.turns import redis_client

TTL = 24 * 3600  # a node that died without decrementing does not leave people online for ever


def key(room_id: int) -> str:
    return f"orbchat:online:{room_id}"


async def arrive(room_id: int, user_id: int) -> None:
    client = redis_client()
    await client.hincrby(key(room_id), str(user_id), 1)
    await client.expire(key(room_id), TTL)
    await _announce(room_id)


async def depart(room_id: int, user_id: int) -> None:
    client = redis_client()
    if await client.hincrby(key(room_id), str(user_id), -1) <= 0:
        await client.hdel(key(room_id), str(user_id))
    await _announce(room_id)


async def users(room_id: int) -> list[int]:
    counts = await redis_client().hgetall(key(room_id))
    return sorted(int(k) for k, v in counts.items() if int(v) > 0)


async def _announce(room_id: int) -> None:
    await get_channel_layer().group_send(
        room_group(room_id), {"type": "room.online", "users": await users(room_id)}
    )
