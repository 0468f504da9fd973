"""Run AI turns inside the web process, owned by the server rather than by any socket.

A turn is an asyncio task: closing the tab that asked for it changes nothing. Tokens go to the
room group as they arrive; the text is saved every half second so a reload shows it; Stop is a
flag in Redis (any web node can set it) that the task checks while streaming.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import weakref
from collections.abc import Callable

from channels.db import database_sync_to_async
from django.utils import timezone

from orbchat import redis
from orbchat.connections import gateway
from orbchat.connections.gateway import plain_error
from rooms import events, memory_port, services, speakers
from rooms.models import Message, Room, Seat, Variant
from rooms.options import RoomOptions, room_options
from rooms.prompting import NoChatModel, TurnPlan, plan_turn

# What every member hears when a reply fails; the host alone hears the provider's reason.
REPLY_FAILED = "The reply failed."
STREAM_CUT = "The provider's stream was cut off before the reply finished."

log = logging.getLogger(__name__)

SAVE_EVERY = 0.5  # seconds between saves of a growing reply
STOP_POLL = 0.25  # seconds between checks of the Stop flag
STOP_TTL = 600
PROVIDER_TIMEOUT = 120.0  # seconds without an answer before a turn is called failed
# litellm prepares and sends a request in a few milliseconds; the provider may take seconds to
# answer it. What waits for the request to be out (the recall log) waits this long at most.
REQUEST_GRACE = 0.02

_running: set[asyncio.Task] = set()  # keep references: the loop holds tasks only weakly


class TokenSender:
    """Send tokens to the room's tabs without ever falling behind the provider.

    A token goes out at once when nothing is in flight; tokens that arrive while a send is
    in flight go out together in the next one. With many tabs a send costs more than the gap
    between tokens, and this keeps the delay at about one send instead of a growing queue.
    """

    def __init__(self, variant: Variant) -> None:
        self.room_id = variant.room_id
        self.message_id = variant.message_id
        self.variant_id = variant.pk
        self.pending: list[str] = []
        self.wake = asyncio.Event()
        self.closing = False
        self.task = asyncio.create_task(self._run())

    def add(self, delta: str) -> None:
        self.pending.append(delta)
        self.wake.set()

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            if self.pending:
                delta, self.pending = "".join(self.pending), []
                await events.ato_tokens(
                    self.room_id,
                    {
                        "type": "room.token",
                        "message": self.message_id,
                        "variant": self.variant_id,
                        "delta": delta,
                    },
                )
            if self.closing and not self.pending:
                return

    async def close(self) -> None:
        """Send what is left, then stop."""
        self.closing = True
        self.wake.set()
        await self.task


def _keep(task: asyncio.Task) -> asyncio.Task:
    """Hold a reference to the task until it is done (the loop holds tasks only weakly)."""
    _running.add(task)
    task.add_done_callback(_running.discard)
    return task


async def request_stop(room_id: int) -> None:
    """Ask the room's running reply to stop; a reply started after this moment ignores it."""
    await redis.client().set(redis.stop_key(room_id), str(time.time()), ex=STOP_TTL)


async def _stop_requested(room_id: int, since: float) -> bool:
    value = await redis.client().get(redis.stop_key(room_id))
    return value is not None and float(value) >= since


async def notice(room_id: int, text: str, *, retry: bool = False) -> None:
    await events.ato_room(room_id, {"type": "room.notice", "text": text, "retry": retry})


async def reply_failed(room_id: int, host_id: int, error: str, *, cut: bool = False) -> None:
    """Tell the room a reply failed (or was cut off mid-way); only the host hears the provider's why."""
    await notice(room_id, STREAM_CUT if cut else REPLY_FAILED, retry=True)
    if error != STREAM_CUT:
        await events.ato_user(host_id, {"type": "user.notice", "text": f"{REPLY_FAILED} {error}"})


def _begin(
    room_id: int,
    mode: str,
    seat_id: int | None = None,
    *,
    room: Room | None = None,
    seat: Seat | None = None,
    seats: list[Seat] | None = None,
) -> tuple[Variant, TurnPlan]:
    """Plan a turn and open its variant. mode "reply" writes as `seat_id` (None: the Narrator).

    `room` and `seat`, when the caller already read them, save reading them again. The room
    hears what recall found at once; the recall is logged once the request is out (`stream`).
    """
    room = room or room_for_turn(room_id)
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
        room=room,
        seat=seat,
        mode="continue" if mode == "continue" else "normal",
        exclude_message_id=exclude,
        seats=seats,
        on_recalling=lambda: events.memory_recall(room.pk, state="recalling"),
    )
    variant = services.turn_begin(
        room=room, mode=mode, seat=seat, prompt=plan.preview(), model=plan.connection.model
    )
    if plan.recall is not None:
        events.memory_recall(room.pk, state=plan.recall.state, count=plan.recall.count)
    return variant, plan


def room_for_turn(room_id: int) -> Room:
    """Read the room with what a turn reads of it: host (and the host's Chat model), preset, persona."""
    room = Room.objects.select_related("host__model_roles__chat", "preset", "persona").get(pk=room_id)
    room.for_turn = True  # the host's default persona is read once (`services.room_persona`)
    return room


def _recalled(variant: Variant, plan: TurnPlan) -> None:
    """Log the reply's recall and show its detail to the host alone (the room has its count)."""
    outcome = plan.recall
    memory_port.log(room_id=variant.room_id, variant_id=variant.pk, speaker=plan.speaker, outcome=outcome)
    events.recall_detail(plan.host_id, variant.room_id, outcome.detail())
    for text in outcome.notices:
        events.user_notice(plan.host_id, text)


class _RecallLog:
    """Log the turn's recall once the provider has the request (or REQUEST_GRACE has passed)."""

    def __init__(self, variant: Variant, plan: TurnPlan) -> None:
        self.variant, self.plan = variant, plan
        self.task: asyncio.Task | None = None
        self.started = plan.recall is None or plan.recall.state == "off"  # nothing to log

    def __call__(self) -> None:
        if not self.started:
            self.started = True
            self.task = _keep(asyncio.create_task(self._log()))

    async def _log(self) -> None:
        try:
            await database_sync_to_async(_recalled)(self.variant, self.plan)
        except Exception:  # a lost log line must not touch the reply
            log.exception("room %s: could not log the recall", self.variant.room_id)


def _plan_round(
    room_id: int, *, from_human: bool, picked: list[int], room: Room | None = None
) -> tuple[list[int | None], RoomOptions, list[Seat]]:
    """Return who speaks this round, in order (None is the Narrator), the room's options and seats."""
    room = room or Room.objects.get(pk=room_id)
    options = room_options(room)
    seats = list(services.seated(room))
    if picked:
        ids = {s.pk for s in seats}
        return [pk for pk in picked if pk in ids], options, seats
    if from_human and len(seats) == 1 and not options.narrator and options.turn_order != "manual":
        # A solo chat: its one character answers its person (unless muted), no rules to weigh.
        only = seats[0]
        return ([only.pk] if not only.muted or only.speak_next else []), options, seats
    last = room.messages.order_by("-seq").first()
    variant = last.variants.filter(index=last.active_index).first() if last else None
    last_character = last if last and not last.is_human else None
    if last_character is None:
        last_character = room.messages.filter(kind=Message.Kind.CHARACTER).order_by("-seq").first()
    chosen = speakers.pick_speakers(
        order=options.turn_order,
        candidates=[speakers.Candidate(s.pk, s.name, s.talkativeness, s.muted, s.speak_next) for s in seats],
        text=variant.text if variant else "",
        from_human=from_human,
        last_speaker=last_character.seat_id if last_character else None,
        allow_self_replies=options.allow_self_replies,
        rng=random.Random(),
    )
    if options.narrator and chosen:
        Seat.objects.filter(pk__in=chosen, speak_next=True).update(speak_next=False)
        return [None], options, seats
    return chosen, options, seats


def _prepare(room_id: int, before: Callable[[Room], object]) -> None:
    before(room_for_turn(room_id))


class _NotPrepared(Exception):
    """What a round runs first (saving the person's message) failed; the round does not start."""


def _open_round(
    room_id: int, *, from_human: bool, picked: list[int], before: Callable[[Room], object] | None = None
) -> tuple[list[int | None], RoomOptions, tuple[Variant, TurnPlan] | Exception | None]:
    """Pick the round's speakers and begin the first one's reply (or say why it cannot begin).

    `before(room)` runs first, in the same trip to the database (the person's message is saved).
    """
    try:
        room = room_for_turn(room_id)
        if before is not None:
            before(room)
    except Exception as exc:
        if before is None:
            raise
        raise _NotPrepared() from exc
    order, options, seats = _plan_round(room_id, from_human=from_human, picked=picked, room=room)
    if not order:
        return order, options, None
    seat = next((s for s in seats if s.pk == order[0]), None)
    try:
        return order, options, _begin(room_id, "reply", order[0], room=room, seat=seat, seats=seats)
    except (services.TurnBusy, services.ActionRefused, NoChatModel) as exc:
        return order, options, exc
    except Seat.DoesNotExist:
        return order, options, services.ActionRefused("That seat is gone.")


class _Rounds:
    """The rounds of one room in this process: who speaks next, and whether a person interrupted."""

    def __init__(self) -> None:
        self.task: asyncio.Task | None = None
        self.interrupted = asyncio.Event()  # a person wrote: end the auto chain, start over
        self.picked: list[int] = []


# Per event loop, keyed by the loop object (an id() may be reused by a later loop).
_rooms: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, _Rounds]] = weakref.WeakKeyDictionary()


def _rounds_for(room_id: int) -> _Rounds:
    loop = asyncio.get_running_loop()
    rooms = _rooms.get(loop)
    if rooms is None:
        rooms = _rooms[loop] = {}
    state = rooms.get(room_id)
    if state is None:
        state = rooms[room_id] = _Rounds()
    return state


async def start_turn(
    room_id: int,
    mode: str = "reply",
    *,
    picked: list[int] | None = None,
    before: Callable[[Room], object] | None = None,
) -> Variant | None:
    """Answer in the room: "reply" runs a round (every speaker the turn order picks, one after
    another); "regenerate" and "continue" rework the last reply. Refusals become room notices.

    `before(room)` ("reply" only) runs first, in the round's first trip to the database: the
    person's message is saved there. What it raises is raised here, and no round runs.

    A person's message while a round runs ends the auto chain and starts a new round for it once
    the current reply is done, so nothing is refused or lost.
    """
    if mode != "reply":
        # Room events wait while the reply is planned (`events.hold`).
        return await _single(room_id, mode, release=events.hold())
    state = _rounds_for(room_id)
    if before is not None and _round_running(state):
        await database_sync_to_async(_prepare)(room_id, before)
        before = None
    if _round_running(state):
        # Checked again after any wait: the round answers this request once its reply is done.
        state.picked = list(picked or [])
        state.interrupted.set()
        return None
    first: asyncio.Future = asyncio.get_running_loop().create_future()
    state.picked = list(picked or [])
    state.interrupted.clear()
    release = events.hold()
    state.task = _keep(
        asyncio.create_task(_run_rounds(room_id, state, first, before=before, release=release))
    )
    return await first


def _round_running(state: _Rounds) -> bool:
    return state.task is not None and not state.task.done()


async def _single(
    room_id: int, mode: str, seat_id: int | None = None, *, release: Callable[[], None] | None = None
) -> Variant | None:
    try:
        variant, plan = await database_sync_to_async(_begin)(room_id, mode, seat_id)
    except (services.TurnBusy, services.ActionRefused, NoChatModel) as exc:
        if release is not None:
            release()
        await notice(room_id, str(exc))
        return None
    _keep(asyncio.create_task(stream(variant, plan, release=release)))
    return variant


async def _run_rounds(
    room_id: int,
    state: _Rounds,
    first: asyncio.Future,
    *,
    before: Callable[[Room], object] | None = None,
    release: Callable[[], None] | None = None,
) -> None:
    """Run a person's round, then the auto chain (if on) until it is done, stopped or interrupted.

    A person writing during the chain ends it: their message gets its round, and the chain does
    not start again until a later message. `before` and `release` are for the first round.
    """
    started = time.time()
    auto_done = 0
    from_human = True
    auto_allowed = True
    try:
        while True:
            state.interrupted.clear()
            picked, state.picked = state.picked, []
            release = release or events.hold()
            # One trip to the database saves the person's message (`before`), picks the speakers
            # and opens the first one's reply.
            try:
                order, options, opened = await database_sync_to_async(_open_round)(
                    room_id, from_human=from_human, picked=picked, before=before
                )
            except _NotPrepared as exc:
                release()
                if not first.done():
                    first.set_exception(exc.__cause__)
                return
            before = None
            if isinstance(opened, Exception) or not order:
                release()
            if isinstance(opened, Exception):
                await notice(room_id, str(opened))
                return
            if not order and not first.done():
                await notice(room_id, "Nobody was picked to answer. Name a character or ask one to speak.")
            outcome = await _speak_in_turn(room_id, order, state, first, opened, release=release)
            release = None
            if outcome == "interrupted":
                auto_allowed = auto_allowed and from_human
                from_human, auto_done = True, 0
                continue
            if outcome != "done" or not order or await _stop_requested(room_id, started):
                return
            if not auto_allowed or not speakers.auto_continues(
                rounds_done=auto_done, max_rounds=options.auto_turns
            ):
                return
            try:
                await asyncio.wait_for(state.interrupted.wait(), timeout=options.auto_delay)
            except TimeoutError:
                from_human, auto_done = False, auto_done + 1
            else:
                from_human, auto_done, auto_allowed = True, 0, False
            if await _stop_requested(room_id, started):
                return
    finally:
        if not first.done():
            first.set_result(None)
        this = asyncio.current_task()
        if state.interrupted.is_set() and state.task is this and not this.cancelling():
            # Someone asked for a reply after this round last looked (while it was ending): their
            # message gets a round of its own, as if it had come a moment later.
            loop = asyncio.get_running_loop()
            state.task = _keep(loop.create_task(_run_rounds(room_id, state, loop.create_future())))


async def _speak_in_turn(
    room_id: int,
    order: list[int | None],
    state: _Rounds,
    first: asyncio.Future,
    opened: tuple[Variant, TurnPlan] | None = None,
    *,
    release: Callable[[], None] | None = None,
) -> str:
    """Let each speaker answer in turn, each seeing the previous one's committed reply.

    `opened` is the first speaker's reply, already begun; `release` ends the hold on room events
    taken while it was planned.
    """
    for position, seat_id in enumerate(order):
        if not (position == 0 and opened):
            if release is not None:
                release()
            if state.interrupted.is_set():
                return "interrupted"
            release = events.hold()
        try:
            if position == 0 and opened:
                variant, plan = opened
            else:
                variant, plan = await database_sync_to_async(_begin)(room_id, "reply", seat_id)
        except (services.TurnBusy, services.ActionRefused, NoChatModel, Seat.DoesNotExist) as exc:
            if release is not None:
                release()
            await notice(
                room_id, str(exc) if not isinstance(exc, Seat.DoesNotExist) else "That seat is gone."
            )
            return "failed"
        if not first.done():
            first.set_result(variant)
        state_after = await stream(variant, plan, release=release)
        release = None
        if state_after != Variant.State.DONE:
            return "failed"
    return "interrupted" if state.interrupted.is_set() else "done"


async def stream(variant: Variant, plan: TurnPlan, *, release: Callable[[], None] | None = None) -> str:
    """Stream the reply from the provider into the variant; finish it whatever happens.

    Return the state it ended in (done, stopped or error). `release` ends the hold on the
    room's events (`events.hold`) once the provider has the request: preparing it is the last
    step of the turn's overhead, and rendering events would compete with it.
    """
    room_id = variant.room_id
    sender = TokenSender(variant)
    text = variant.text  # "continue" appends to what is there
    state, finish_reason, error = Variant.State.DONE, "", ""
    usage = {}
    first_token_at = None
    last_save = last_poll = time.monotonic()
    started = time.time()
    recall_log = _RecallLog(variant, plan)

    def request_out() -> None:
        recall_log()
        if release is not None:
            release()

    grace = asyncio.get_running_loop().call_later(REQUEST_GRACE, request_out)
    try:
        try:
            response = await gateway.astream(
                plan.target, plan.prompt.messages, timeout=PROVIDER_TIMEOUT, **plan.params
            )
        finally:
            grace.cancel()
            request_out()
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
                sender.add(delta)
            now = time.monotonic()
            if now - last_poll >= STOP_POLL:
                last_poll = now
                if await _stop_requested(room_id, started):
                    state, finish_reason = Variant.State.STOPPED, "stopped"
                    break
            if now - last_save >= SAVE_EVERY:
                last_save = now
                await database_sync_to_async(services.turn_progress)(variant_id=variant.pk, text=text)
        if state == Variant.State.DONE and not finish_reason:
            # The stream ended without saying why: the connection was cut.
            state, error = Variant.State.ERROR, STREAM_CUT
    except asyncio.CancelledError:
        state, finish_reason = Variant.State.STOPPED, "cancelled"
        raise
    except Exception as exc:  # noqa: BLE001 - every provider failure becomes a notice, never a lost message
        state, error = Variant.State.ERROR, plain_error(exc)
        log.info("turn in room %s failed: %s", room_id, error)
    finally:
        await sender.close()
        if recall_log.task is not None:
            # The log points at the variant, which a failed reply removes: it goes first.
            await asyncio.gather(recall_log.task, return_exceptions=True)
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
            await reply_failed(room_id, plan.host_id, error, cut=first_token_at is not None)
    return state


class DraftFailed(Exception):
    """Impersonate could not draft; the message is for the person who asked."""


async def impersonate(room_id: int, user_id: int) -> str:
    """Draft the user's next message with the Chat model; nothing is saved.

    The Chat model is the host's: a member who asked hears that the draft failed, not why.
    """

    def plan() -> TurnPlan:
        room = Room.objects.select_related("host", "preset", "persona").get(pk=room_id)
        return plan_turn(room=room, seat=services.speaking_seat(room), mode="impersonate")

    turn = await database_sync_to_async(plan)()
    try:
        return await gateway.acomplete(
            turn.target, turn.prompt.messages, timeout=PROVIDER_TIMEOUT, **turn.params
        )
    except Exception as exc:  # noqa: BLE001 - every provider failure becomes a plain sentence
        raise DraftFailed(plain_error(exc) if user_id == turn.host_id else "The draft failed.") from exc
