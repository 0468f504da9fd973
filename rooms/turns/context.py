"""What a turn reads at its start, and opening its reply."""

from __future__ import annotations

from rooms import events, services
from rooms.models import Seat, Variant
from rooms.prompting import TurnContext, TurnPlan, plan_turn


def begin(
    room_id: int,
    mode: str,
    seat_id: int | None = None,
    *,
    turn: TurnContext | None = None,
    seat: Seat | None = None,
    seats: list[Seat] | None = None,
) -> tuple[Variant, TurnPlan]:
    """Plan a turn and open its variant. mode "reply" writes as `seat_id` (None: the Narrator).

    `turn` and `seat`, when the caller already read them, save reading them again. The room
    hears what recall found at once; the recall is logged once the request is out (`stream`).
    """
    turn = turn or TurnContext.read(room_id)
    room = turn.room
    if mode == "reply":
        if seat is None and seat_id is not None:
            seat = Seat.objects.select_related("character").get(pk=seat_id, room=room)
    else:
        last = services.last_message(room)
        if last is None or last.is_human:
            raise services.ActionRefused(f"There is no character reply to {mode}.")
        seat = last.seat
        if seat is None and last.speaker_name != services.NARRATOR:
            raise services.ActionRefused(f"There is no character reply to {mode}.")
    exclude = services.last_message(room).pk if mode == "regenerate" else None
    plan = plan_turn(
        turn=turn,
        seat=seat,
        mode="continue" if mode == "continue" else "normal",
        exclude_message_id=exclude,
        seats=seats,
        on_recalling=lambda: events.memory_recall(room.pk, state="recalling"),
    )
    variant = services.turn_begin(
        room=room, mode=mode, seat=seat, prompt=plan.preview(), model=plan.connection.model
    )
    services.turn_state_save(
        room=room,
        world_info_state=plan.world_info_state,
        variables=plan.variables,
        global_variables=plan.global_variables,
    )
    if plan.recall is not None:
        events.memory_recall(room.pk, state=plan.recall.state, count=plan.recall.count)
    return variant, plan
