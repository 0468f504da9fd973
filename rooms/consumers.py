"""The room socket: parse a frame, check permission, call a service, forward room events."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from orbchat.connections.gateway import plain_error
from rooms import events, permissions, relay, services, turns
from rooms.models import Message, Room

CLOSE_NOT_ALLOWED = 4404


class RoomConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        events.bind_loop()
        self.room_id = int(self.scope["url_route"]["kwargs"]["room_id"])
        user = self.scope.get("user")
        if not await database_sync_to_async(self._allowed)(user):
            await self.close(code=CLOSE_NOT_ALLOWED)
            return
        await relay.join(self.room_id, self)
        self.joined = True
        await self.accept()

    def _allowed(self, user) -> bool:
        room = Room.objects.filter(pk=self.room_id).first()
        return room is not None and user is not None and permissions.can_enter(user, room)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "joined", False):
            await relay.leave(self.room_id, self)

    async def receive_json(self, content: dict, **kwargs) -> None:
        action = content.get("type")
        user = self.scope["user"]
        # Re-check on every action: access can be lost while the socket is open.
        if not await database_sync_to_async(self._allowed)(user):
            await self.send_json({"type": "notice", "text": "You no longer have access to this room."})
            await self.close(code=CLOSE_NOT_ALLOWED)
            return
        handler = getattr(self, f"do_{action}", None) if isinstance(action, str) else None
        if handler is None:
            await self.send_json({"type": "notice", "text": f"Unknown action {action!r}."})
            return
        try:
            await handler(content, user)
        except services.ActionRefused as exc:
            await self.send_json({"type": "notice", "text": str(exc)})

    async def do_send(self, content: dict, user) -> None:
        text = str(content.get("text", ""))

        def create() -> None:
            room = Room.objects.select_related("host", "persona").get(pk=self.room_id)
            services.message_create(room=room, author=user, text=text)

        await database_sync_to_async(create)()
        await turns.start_turn(self.room_id, "reply")

    async def do_reply(self, content: dict, user) -> None:
        await turns.start_turn(self.room_id, "reply")

    async def do_regenerate(self, content: dict, user) -> None:
        await turns.start_turn(self.room_id, "regenerate")

    async def do_continue(self, content: dict, user) -> None:
        await turns.start_turn(self.room_id, "continue")

    async def do_stop(self, content: dict, user) -> None:
        await turns.request_stop(self.room_id)

    async def do_swipe(self, content: dict, user) -> None:
        direction = 1 if content.get("direction") == "right" else -1

        def swipe() -> str | None:
            message = Message.objects.select_related("room").get(
                pk=int(content["message"]), room_id=self.room_id
            )
            last = services.last_message(message.room)
            at_end = message.active_index + 1 >= message.variants.count()
            if (
                direction == 1
                and at_end
                and last
                and last.pk == message.pk
                and not message.is_human
                and message.seq
            ):
                return "regenerate"  # swiping right past the last swipe writes a new one
            services.swipe(message=message, direction=direction)
            return None

        try:
            follow_up = await database_sync_to_async(swipe)()
        except (Message.DoesNotExist, KeyError, ValueError):
            await self.send_json({"type": "notice", "text": "No such message."})
            return
        if follow_up:
            await turns.start_turn(self.room_id, follow_up)

    async def do_impersonate(self, content: dict, user) -> None:
        try:
            draft = await turns.impersonate(self.room_id)
        except Exception as exc:  # noqa: BLE001 - the draft failing is reported, nothing is lost
            await self.send_json({"type": "notice", "text": plain_error(exc)})
            return
        await self.send_json({"type": "draft", "text": draft})

    # Room group events ---------------------------------------------------------------------

    async def room_message(self, event: dict) -> None:
        frame = {"type": "message", "id": event["id"], "seq": event["seq"], "html": event["html"]}
        await self.send_json({**frame, "created": event.get("created", False)})

    async def room_token(self, event: dict) -> None:
        await self.send_json({"type": "token", "message": event["message"], "delta": event["delta"]})

    async def room_removed(self, event: dict) -> None:
        await self.send_json({"type": "removed", "ids": event["ids"]})

    async def room_notice(self, event: dict) -> None:
        await self.send_json({"type": "notice", "text": event["text"], "retry": event.get("retry", False)})
