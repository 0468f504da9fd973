"""The site-wide websocket: one per open tab, for the signed-in user."""

from __future__ import annotations

import json
import logging

from channels.generic.websocket import AsyncJsonWebsocketConsumer

log = logging.getLogger(__name__)

# Close code for "not signed in" (4000–4999 is the application range).
CLOSE_UNAUTHENTICATED = 4401


class BadFrame(ValueError):
    """A frame the socket cannot act on; its text tells the sender what is wrong."""


class FrameConsumer(AsyncJsonWebsocketConsumer):
    """A JSON socket that answers a frame it cannot use with an error frame and stays open.

    Each frame is a JSON object with a "type". Anything else (binary, not JSON, not an object, a
    field of the wrong type) gets `{"type": "error", "message": ...}` in words; so does a
    failure while handling a frame, which is logged. The socket is never closed for it: a close
    from a crash would skip `disconnect` and leave the person's presence behind.
    """

    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        if text_data is None:
            await self.send_error("This socket reads text frames of JSON; a binary frame was ignored.")
            return
        try:
            content = json.loads(text_data)
        except (ValueError, RecursionError):
            await self.send_error('That frame is not JSON. Send an object such as {"type": "ping"}.')
            return
        if not isinstance(content, dict):
            await self.send_error('A frame is a JSON object with a "type", such as {"type": "ping"}.')
            return
        try:
            await self.receive_json(content, **kwargs)
        except BadFrame as exc:
            await self.send_error(str(exc))
        except Exception:  # noqa: BLE001 - reported to the sender and logged; the socket stays open
            log.exception("a %s frame failed", content.get("type"))
            await self.send_error("The server failed while doing that. Try again in a moment.")

    async def send_error(self, message: str) -> None:
        await self.send_json({"type": "error", "message": message})


def user_group(user_id: int) -> str:
    """Return the per-user group: host-only data goes here, never on a room group."""
    return f"user.{user_id}"


class SiteConsumer(FrameConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated or not user.is_active:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.group = user_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"type": "hello", "user": user.get_username()})

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def user_closed(self, event: dict) -> None:
        """Close every open tab of a person who may no longer be signed in (deactivated)."""
        await self.send_json({"type": "notice", "text": event["text"]})
        await self.close(code=CLOSE_UNAUTHENTICATED)

    async def user_notice(self, event: dict) -> None:
        """Forward a notice meant for this user (every open tab of theirs gets it)."""
        await self.send_json({"type": "notice", "text": event["text"]})

    async def user_progress(self, event: dict) -> None:
        """Forward progress of this user's background work (a memory backfill, a re-index)."""
        await self.send_json(
            {key: event[key] for key in ("what", "room", "done", "total")} | {"type": "progress"}
        )

    async def user_memory(self, event: dict) -> None:
        """Forward a room's memory cycle to its host: the "Update memory?" prompt, stages, tokens."""
        await self.send_json(
            {key: value for key, value in event.items() if key != "type"} | {"type": "memory_cycle"}
        )

    async def user_recall(self, event: dict) -> None:
        """Forward the recall detail of a room this user hosts (host-only: never on a room group)."""
        await self.send_json({"type": "recall_detail", "room": event["room"], "detail": event["detail"]})

    async def receive_json(self, content: dict, **kwargs) -> None:
        kind = content.get("type")
        if kind == "ping":
            await self.send_json({"type": "pong"})
        elif isinstance(kind, str):
            await self.send_error(f'Unknown message type {kind!r}: this socket answers only "ping".')
        else:
            await self.send_error('A frame needs a "type" (a string), such as {"type": "ping"}.')
