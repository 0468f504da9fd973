"""Impersonate: draft the person's next message with the host's Chat model."""

from __future__ import annotations

from channels.db import database_sync_to_async

from orbchat.accounts.models import User
from orbchat.connections import gateway
from orbchat.connections.gateway import plain_error
from rooms import services
from rooms.prompting import TurnContext, TurnPlan, plan_turn
from rooms.turns import stream


class DraftFailed(Exception):
    """Impersonate could not draft; the message is for the person who asked."""


def _plan(room_id: int, user_id: int) -> TurnPlan:
    turn = TurnContext.read(room_id).as_writer(User.objects.get(pk=user_id))
    return plan_turn(turn=turn, seat=services.speaking_seat(turn.room), mode="impersonate")


async def impersonate(room_id: int, user_id: int) -> str:
    """Draft the user's next message with the Chat model, as the persona they write as in the
    room ({{user}} is theirs, a member's as much as the host's); nothing is saved.

    The Chat model is the host's: a member who asked hears that the draft failed, not why.
    """
    turn = await database_sync_to_async(_plan)(room_id, user_id)
    try:
        if turn.text_prompt is not None:
            return await gateway.atext_complete(
                turn.target, turn.text_prompt, timeout=stream.PROVIDER_TIMEOUT, **turn.params
            )
        return await gateway.acomplete(
            turn.target, turn.prompt.messages, timeout=stream.PROVIDER_TIMEOUT, **turn.params
        )
    except Exception as exc:  # noqa: BLE001 - every provider failure becomes a plain sentence
        raise DraftFailed(plain_error(exc) if user_id == turn.host_id else "The draft failed.") from exc
