"""Run AI turns inside the web process, owned by the server rather than by any socket.

A turn is an asyncio task: closing the tab that asked for it changes nothing. Tokens go to the
room group as they arrive; the text is saved every half second so a reload shows it; Stop is a
flag in Redis (any web node can set it) that the task checks while streaming.
"""

from __future__ import annotations

import asyncio
import logging
import time

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from orbchat.connections.gateway import plain_error
from rooms import events, services
from rooms.models import Room, Variant
from rooms.prompting import NoChatModel, TurnPlan, plan_turn

log = logging.getLogger(__name__)

SAVE_EVERY = 0.5  # seconds between saves of a growing reply
STOP_POLL = 0.25  # seconds between checks of the Stop flag
STOP_TTL = 600
PROVIDER_TIMEOUT = 120.0  # seconds without an answer before a turn is called failed

_running: set[asyncio.Task] = set()  # keep references: the loop holds tasks only weakly


def stop_key(room_id: int) -> str:
    return f"orbchat:stop:{room_id}"


def _redis():
    import redis.asyncio as aioredis

    return aioredis.Redis.from_url(settings.REDIS_URL)


async def request_stop(room_id: int) -> None:
    client = _redis()
    try:
        await client.set(stop_key(room_id), "1", ex=STOP_TTL)
    finally:
        await client.aclose()


async def _clear_stop(room_id: int) -> None:
    client = _redis()
    try:
        await client.delete(stop_key(room_id))
    finally:
        await client.aclose()


async def notice(room_id: int, text: str, *, retry: bool = False) -> None:
    await get_channel_layer().group_send(
        events.room_group(room_id), {"type": "room.notice", "text": text, "retry": retry}
    )


def _begin(room_id: int, mode: str) -> tuple[Variant, TurnPlan]:
    room = Room.objects.select_related("host", "preset", "persona").get(pk=room_id)
    seat = services.speaking_seat(room) if mode == "reply" else None
    if mode != "reply":
        last = services.last_message(room)
        if last is None or last.is_human or last.seat is None:
            raise services.ActionRefused(f"There is no character reply to {mode}.")
        seat = last.seat
    exclude = services.last_message(room).pk if mode == "regenerate" else None
    plan = plan_turn(
        room=room, seat=seat, mode="continue" if mode == "continue" else "normal", exclude_message_id=exclude
    )
    variant = services.turn_begin(room=room, mode=mode, seat=seat)
    services.turn_record_prompt(variant_id=variant.pk, prompt=plan.preview(), model=plan.connection.model)
    return variant, plan


async def start_turn(room_id: int, mode: str = "reply") -> Variant | None:
    """Plan and open a turn, then stream it in the background. Refusals become room notices."""
    try:
        variant, plan = await database_sync_to_async(_begin)(room_id, mode)
    except services.TurnBusy as exc:
        await notice(room_id, str(exc))
        return None
    except (services.ActionRefused, NoChatModel) as exc:
        await notice(room_id, str(exc))
        return None
    await _clear_stop(room_id)
    task = asyncio.create_task(stream(variant, plan))
    _running.add(task)
    task.add_done_callback(_running.discard)
    return variant


async def stream(variant: Variant, plan: TurnPlan) -> None:
    """Stream the reply from the provider into the variant; finish it whatever happens."""
    import litellm

    room_id = variant.room_id
    group = events.room_group(room_id)
    layer = get_channel_layer()
    text = variant.text  # "continue" appends to what is there
    state, finish_reason, error = Variant.State.DONE, "", ""
    usage = {}
    first_token_at = None
    last_save = last_poll = time.monotonic()
    client = _redis()
    try:
        response = await litellm.acompletion(
            model=plan.target.model,
            messages=plan.prompt.messages,
            api_base=plan.target.api_base,
            api_key=plan.target.api_key,
            stream=True,
            stream_options={"include_usage": True},
            num_retries=0,
            timeout=PROVIDER_TIMEOUT,
            **{**plan.target.extra, **plan.params},
        )
        async for chunk in response:
            if getattr(chunk, "usage", None):
                usage = {"prompt": chunk.usage.prompt_tokens, "completion": chunk.usage.completion_tokens}
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            delta = choice.delta.content or ""
            if choice.finish_reason:
                finish_reason = choice.finish_reason
            if delta:
                if first_token_at is None:
                    first_token_at = timezone.now()
                text += delta
                await layer.group_send(
                    group,
                    {
                        "type": "room.token",
                        "message": variant.message_id,
                        "variant": variant.pk,
                        "delta": delta,
                    },
                )
            now = time.monotonic()
            if now - last_poll >= STOP_POLL:
                last_poll = now
                if await client.exists(stop_key(room_id)):
                    state, finish_reason = Variant.State.STOPPED, "stopped"
                    break
            if now - last_save >= SAVE_EVERY:
                last_save = now
                await database_sync_to_async(services.turn_progress)(variant_id=variant.pk, text=text)
        if state == Variant.State.DONE and not finish_reason:
            # The stream ended without saying why: the connection was cut.
            state, error = Variant.State.ERROR, "The provider's stream was cut off before the reply finished."
    except asyncio.CancelledError:
        state, finish_reason = Variant.State.STOPPED, "cancelled"
        raise
    except Exception as exc:  # noqa: BLE001 - every provider failure becomes a notice, never a lost message
        state, error = Variant.State.ERROR, plain_error(exc)
        log.info("turn in room %s failed: %s", room_id, error)
    finally:
        await client.delete(stop_key(room_id))
        await client.aclose()
        await database_sync_to_async(services.turn_finish)(
            variant_id=variant.pk,
            text=text,
            state=state,
            finish_reason=finish_reason,
            error=error,
            prompt_tokens=usage.get("prompt"),
            completion_tokens=usage.get("completion"),
            first_token_at=first_token_at,
        )
        if error:
            await notice(room_id, error, retry=True)


async def impersonate(room_id: int) -> str:
    """Draft the user's next message with the Chat model; nothing is saved."""
    import litellm

    def plan() -> TurnPlan:
        room = Room.objects.select_related("host", "preset", "persona").get(pk=room_id)
        return plan_turn(room=room, seat=services.speaking_seat(room), mode="impersonate")

    turn = await database_sync_to_async(plan)()
    response = await litellm.acompletion(
        model=turn.target.model,
        messages=turn.prompt.messages,
        api_base=turn.target.api_base,
        api_key=turn.target.api_key,
        num_retries=0,
        timeout=PROVIDER_TIMEOUT,
        **{**turn.target.extra, **turn.params},
    )
    return response.choices[0].message.content or ""
