"""The site-wide websocket: one per open tab, for the signed-in user."""

from __future__ import annotations

from channels.generic.websocket import AsyncJsonWebsocketConsumer

# Close code for "not signed in" (4000–4999 is the application range).
CLOSE_UNAUTHENTICATED = 4401


def user_group(user_id: int) -> str:
    """Return the per-user group: host-only data goes here, never on a room group."""
    return f"user.{user_id}"


class SiteConsumer(AsyncJsonWebsocketConsumer):
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

    async def user_notice(self, event: dict) -> None:
        """Forward a notice meant for this user (every open tab of theirs gets it)."""
        await self.send_json({"type": "notice", "text": event["text"]})

    async def user_progress(self, event: dict) -> None:
        """Forward progress of this user's background work (a memory backfill, a re-index)."""
        await self.send_json(
            {key: event[key] for key in ("what", "room", "done", "total")} | {"type": "progress"}
        )

    async def user_recall(self, event: dict) -> None:
        """Forward the recall detail of a room this user hosts (host-only: never on a room group)."""
        await self.send_json({"type": "recall_detail", "room": event["room"], "detail": event["detail"]})

    async def receive_json(self, content: dict, **kwargs) -> None:
        if content.get("type") == "ping":
            await self.send_json({"type": "pong"})
        else:
            await self.send_json({"type": "error", "message": "Unknown message type."})
