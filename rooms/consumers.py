"""The room socket: parse a frame, check permission, call a service, forward room events."""

from __future__ import annotations

import asyncio
import uuid

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from orbchat.connections.gateway import plain_error
from orbchat.consumers import BadFrame, FrameConsumer
from rooms import events, online, permissions, relay, services, turns
from rooms.models import Message, Room, Seat
from rooms.prompting import NoChatModel, TurnContext

CLOSE_NOT_ALLOWED = 4404
# Actions whose handler runs the access check itself, first thing in its own trip to the
# database (the same check, one trip fewer on the path of a turn).
CHECKED_IN_TRIP = {"send"}


class Refused(Exception):
    """The access check refused the action: "gone", or the refusal's text."""

    def __init__(self, refusal: str) -> None:
        super().__init__(refusal)
        self.refusal = refusal


def _id(content: dict, field: str, what: str) -> int:
    """Return the frame's `field` as an id (a whole number, or its digits as a string)."""
    value = content.get(field)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise BadFrame(f'"{field}" must be the id of a {what} (a whole number).')


class RoomConsumer(FrameConsumer):
    # No channel of its own on the channel layer: the room's events reach the socket through
    # the process's relay (`rooms.relay`). A channel per socket would be one more waiter in the
    # layer's receive for every open tab, woken and put back for every event of every room.
    channel_layer_alias = None

    async def connect(self) -> None:
        events.bind_loop()
        self.room_id = int(self.scope["url_route"]["kwargs"]["room_id"])
        user = self.scope.get("user")
        if await database_sync_to_async(self._allowed)(user, None):
            await self.close(code=CLOSE_NOT_ALLOWED)
            return
        await relay.join(self.room_id, self)
        self.joined = True
        await self.accept()
        self.presence = online.Presence(self.room_id, user.pk, uuid.uuid4().hex)
        await self.presence.arrive()
        self.heartbeat = asyncio.create_task(self.presence.keep_alive(asyncio.current_task()))

    def _allowed(self, user, action: str | None, room: Room | None = None) -> str:
        """Return "" when allowed; otherwise "gone" (no access at all) or the refusal's text.

        `room`, when the caller has just read it (with its host), is not read again.
        """
        if room is None:
            room = Room.objects.filter(pk=self.room_id).select_related("host").first()
        if user is not None and user.is_authenticated:
            # Fresh from the database: a person deactivated since connecting is out at once.
            if room is not None and room.host_id == user.pk:
                user = room.host if room.host.is_active else None  # the same row, just read
            else:
                user = get_user_model().objects.filter(pk=user.pk, is_active=True).first()
        if room is None or user is None or not permissions.can_enter(user, room):
            return "gone"
        if action is None:
            return ""
        if not permissions.may_act(user, room, action):
            return "Only the host can do that."
        if room.archived_at and action in permissions.POSTING_ACTIONS:
            return "This room is archived: it can be read, not written to."
        return ""

    async def disconnect(self, code: int) -> None:
        if getattr(self, "joined", False):
            self.joined = False
            await relay.leave(self.room_id, self)
        if getattr(self, "presence", None) is not None:
            self.heartbeat.cancel()
            presence, self.presence = self.presence, None
            await presence.depart()

    async def receive_json(self, content: dict, **kwargs) -> None:
        action = content.get("type")
        user = self.scope["user"]
        if not isinstance(action, str):
            raise BadFrame(
                'A frame needs a "type" naming the action, such as {"type": "send", "text": "Hi"}.'
            )
        handler = getattr(self, f"do_{action}", None)
        if handler is None or action not in CHECKED_IN_TRIP:
            # Checked on every action: access can be lost while the socket is open.
            refusal = await database_sync_to_async(self._allowed)(user, action if handler else None)
            if refusal:  # without a handler, only "gone"
                await self._refuse(refusal)
                return
            if handler is None:
                raise BadFrame(f"Unknown action {action!r}.")
        try:
            await handler(content, user)
        except Refused as exc:
            await self._refuse(exc.refusal)
        except services.ActionRefused as exc:
            await self.send_json({"type": "notice", "text": str(exc)})

    async def _refuse(self, refusal: str) -> None:
        if refusal == "gone":
            await self.send_json({"type": "notice", "text": "You no longer have access to this room."})
            await self.close(code=CLOSE_NOT_ALLOWED)
        else:
            await self.send_json({"type": "notice", "status": 403, "text": refusal})

    async def do_send(self, content: dict, user) -> None:
        text = content.get("text", "")
        if not isinstance(text, str):
            raise BadFrame('"text" must be a string: the message to send.')

        def create(turn: TurnContext) -> None:
            refusal = self._allowed(user, "send", turn.room)
            if refusal:
                raise Refused(refusal)
            services.message_create(room=turn.room, author=user, text=text, writer=turn.writer(user))

        # Checked and saved in the same trip to the database that opens the reply.
        try:
            await turns.start_turn(self.room_id, "reply", before=create)
        except Room.DoesNotExist as exc:
            raise Refused("gone") from exc

    async def do_reply(self, content: dict, user) -> None:
        await turns.start_turn(self.room_id, "reply")

    async def do_speak(self, content: dict, user) -> None:
        """Ask one seated character to answer now (muted or not)."""
        seat_id = _id(content, "seat", "seat (the character who should speak)")
        await turns.start_turn(self.room_id, "reply", picked=[seat_id])

    async def do_speak_next(self, content: dict, user) -> None:
        seat_id = _id(content, "seat", "seat")
        on = content.get("on", True)
        if not isinstance(on, bool):
            raise BadFrame('"on" must be true or false.')

        def flag() -> None:
            seat = Seat.objects.get(pk=seat_id, room_id=self.room_id)
            services.seat_update(seat=seat, speak_next=on)

        try:
            await database_sync_to_async(flag)()
        except Seat.DoesNotExist:
            await self.send_json({"type": "notice", "text": "No such seat."})

    async def do_regenerate(self, content: dict, user) -> None:
        await turns.start_turn(self.room_id, "regenerate")

    async def do_continue(self, content: dict, user) -> None:
        await turns.start_turn(self.room_id, "continue")

    async def do_stop(self, content: dict, user) -> None:
        await turns.request_stop(self.room_id)

    async def do_swipe(self, content: dict, user) -> None:
        message_id = _id(content, "message", "message")
        if content.get("direction") not in ("left", "right"):
            raise BadFrame('"direction" must be "left" or "right".')
        direction = 1 if content["direction"] == "right" else -1

        def swipe() -> str | None:
            message = Message.objects.select_related("room").get(pk=message_id, room_id=self.room_id)
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
        except Message.DoesNotExist:
            await self.send_json({"type": "notice", "text": "No such message."})
            return
        if follow_up:
            await turns.start_turn(self.room_id, follow_up)

    async def do_impersonate(self, content: dict, user) -> None:
        try:
            draft = await turns.impersonate(self.room_id, user.pk)
        except Exception as exc:  # noqa: BLE001 - the draft failing is reported, nothing is lost
            text = str(exc) if isinstance(exc, turns.DraftFailed | NoChatModel) else plain_error(exc)
            await self.send_json({"type": "notice", "text": text})
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

    async def room_people(self, event: dict) -> None:
        await self.send_json({"type": "people", "text": event["text"], "reload": event.get("reload", False)})

    async def room_online(self, event: dict) -> None:
        await self.send_json({"type": "online", "users": event["users"]})

    async def room_kicked(self, event: dict) -> None:
        if event["user"] == self.scope["user"].pk:
            # Not relay.leave() here: this runs inside the room relay, which that could stop.
            relay.drop(self.room_id, self)  # nothing more of the room reaches this socket
            await self.send_json(
                {"type": "notice", "text": event.get("text", "You are no longer in this room.")}
            )
            await self.close(code=CLOSE_NOT_ALLOWED)

    async def memory_recall(self, event: dict) -> None:
        """The brain icon: "recalling", then the count (everyone may see the count, nothing more)."""
        await self.send_json({"type": "recall", "state": event["state"], "count": event["count"]})

    async def room_notice(self, event: dict) -> None:
        await self.send_json({"type": "notice", "text": event["text"], "retry": event.get("retry", False)})
