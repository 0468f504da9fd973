"""When a room's memory cycle runs: after each reply (automatic), once the host says so (ask
first) or only on request (manual), set apart for solo and group chats in the memory tuning.

"Ask first" keeps its state on the room's RoomMemory: the batch the host was last asked about
(asked once per batch) and the one they skipped; the prompt stands, on every reload, until the
batch is written or skipped. The host alone is asked, starts and cancels a cycle.
"""

from __future__ import annotations

import json

from django.db import transaction

from memory import blocks, jobs, runmodes
from memory.models import SHARED, RoomMemory
from memory.selectors import block_tuning, memory_on, message_seqs, tuning_get
from memory.services.catch_up import summary_states
from orbchat import redis
from rooms import events
from rooms.models import Member, Room, Seat

CANCEL_SECONDS = 600  # how long a Cancel waits for the cycle it stops
STATE_SECONDS = 60  # a running cycle's state outlives its last update by this much
STATE_TEXT = 4000  # characters of the Utility model's latest output kept with it


def is_group(room: Room) -> bool:
    """A group chat: several characters seated in it, or other people (active members) in it."""
    return (
        Seat.objects.filter(room=room).count() > 1
        or Member.objects.filter(room=room, state=Member.State.ACTIVE).exists()
    )


def run_mode(room: Room) -> str:
    """The room's run mode ("automatic", "ask" or "manual") from the memory tuning."""
    tuning = tuning_get()
    return runmodes.mode_for(group=is_group(room), solo_mode=tuning.run_solo, group_mode=tuning.run_group)


def due_batch(room: Room) -> runmodes.Batch | None:
    """The batch a cycle would summarise now (the shared summaries), or None (memory off too)."""
    tuning = tuning_get()
    if not memory_on(room, tuning):
        return None
    t = block_tuning(tuning)
    existing, visible = message_seqs(room)
    plan = blocks.plan(
        existing_seqs=existing,
        visible_seqs=visible,
        summaries=summary_states(room, SHARED, upgrade=False),
        t=t,
    )
    return runmodes.batch_due(visible_seqs=visible, write=plan.write, t=t)


def ask_prompt(room: Room) -> runmodes.Batch | None:
    """The batch the host's "Update memory?" prompt is about, or None when it does not stand."""
    if run_mode(room) != runmodes.ASK:
        return None
    batch = due_batch(room)
    state = RoomMemory.objects.filter(room=room).first()
    skipped = state.skipped_to_seq if state else -1
    return batch if runmodes.should_ask(batch, skipped_to=skipped) else None


def _ask_event(room_id: int, batch: runmodes.Batch | None) -> dict:
    return {
        "type": "user.memory",
        "room": room_id,
        "kind": "ask",
        "messages": batch.messages if batch else 0,
        "upto": batch.upto if batch else -1,
    }


@transaction.atomic
def reply_arrived(*, room_id: int) -> None:
    """A reply committed: run the cycle, ask the host about the batch now due, or do nothing."""
    room = Room.objects.filter(pk=room_id).first()
    if room is None:
        return
    mode = run_mode(room)
    if mode == runmodes.AUTOMATIC:
        jobs.enqueue_catch_up(room_id)
        return
    if mode == runmodes.MANUAL:
        return
    batch = due_batch(room)
    state, _ = RoomMemory.objects.select_for_update().get_or_create(room=room)
    if not runmodes.should_notify(batch, asked_to=state.asked_to_seq, skipped_to=state.skipped_to_seq):
        return
    state.asked_to_seq = batch.upto
    state.save(update_fields=["asked_to_seq", "updated_at"])
    events.to_user_now(room.host_id, _ask_event(room_id, batch))


@transaction.atomic
def batch_skip(*, room: Room) -> None:
    """The host skipped the batch due now: not asked again until a later batch is due."""
    batch = due_batch(room)
    state, _ = RoomMemory.objects.select_for_update().get_or_create(room=room)
    if batch is not None:
        state.skipped_to_seq = max(state.skipped_to_seq, batch.upto)
        state.asked_to_seq = max(state.asked_to_seq, batch.upto)
        state.save(update_fields=["skipped_to_seq", "asked_to_seq", "updated_at"])
    events.to_user_now(room.host_id, _ask_event(room.pk, None))


def cycle_start(*, room: Room) -> None:
    """Run the room's memory cycle now (Start now, Update memory now)."""
    redis.sync_client().delete(redis.memory_cycle_cancel_key(room.pk))
    events.to_user_now(room.host_id, _ask_event(room.pk, None), on_commit=False)
    jobs.send(jobs.CATCH_UP, room.pk)


def cycle_cancel(*, room: Room) -> None:
    """Stop the room's running cycle after the model call it is in."""
    redis.sync_client().set(redis.memory_cycle_cancel_key(room.pk), "1", ex=CANCEL_SECONDS)


def cycle_state_save(room_id: int, state: dict) -> None:
    """Keep a running cycle's latest state, so that a page opened meanwhile shows the panel as it
    stands (`cycle_now`); an ended cycle's is dropped."""
    key = redis.memory_cycle_state_key(room_id)
    if state.get("state") != "running":
        redis.sync_client().delete(key)
        return
    kept = {**state, "text": str(state.get("text", ""))[-STATE_TEXT:]}
    redis.sync_client().set(key, json.dumps(kept), ex=STATE_SECONDS)


def cycle_now(room_id: int) -> dict | None:
    """The room's running memory cycle (stages, tokens, speed, output so far), or None."""
    raw = redis.sync_client().get(redis.memory_cycle_state_key(room_id))
    try:
        state = json.loads(raw) if raw else None
    except ValueError:
        return None
    return state if isinstance(state, dict) else None


def cycle_cancelled(room_id: int) -> bool:
    return bool(redis.sync_client().exists(redis.memory_cycle_cancel_key(room_id)))


def cycle_ended(room_id: int) -> None:
    """Forget a Cancel once the cycle it was for has stopped."""
    redis.sync_client().delete(redis.memory_cycle_cancel_key(room_id))
