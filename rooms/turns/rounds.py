"""Rounds: who speaks this round, one after another, then the auto chain while it runs."""

from __future__ import annotations

import asyncio
import random
import time
import weakref
from collections.abc import Callable

from channels.db import database_sync_to_async

from rooms import events, services, speakers
from rooms.models import Message, Room, Seat, Variant
from rooms.options import RoomOptions, room_options
from rooms.prompting import NoChatModel, TurnContext, TurnPlan
from rooms.turns import stop
from rooms.turns.context import begin
from rooms.turns.stream import Reply, keep, notice

# What a round runs first, with the turn's context (saving the person's message).
Prepare = Callable[[TurnContext], object]

# Why a reply cannot begin; each becomes a room notice.
REFUSED = (services.TurnBusy, services.ActionRefused, NoChatModel)


def plan_round(
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


def _prepare(room_id: int, before: Prepare) -> None:
    before(TurnContext.read(room_id))


class NotPrepared(Exception):
    """What a round runs first (saving the person's message) failed; the round does not start."""


def open_round(
    room_id: int,
    *,
    from_human: bool,
    picked: list[int],
    before: Prepare | None = None,
) -> tuple[list[int | None], RoomOptions, tuple[Variant, TurnPlan] | Exception | None]:
    """Pick the round's speakers and begin the first one's reply (or say why it cannot begin).

    `before(turn)` runs first, in the same trip to the database (the person's message is saved).
    """
    try:
        turn = TurnContext.read(room_id)
        if before is not None:
            before(turn)
    except Exception as exc:
        if before is None:
            raise
        raise NotPrepared() from exc
    order, options, seats = plan_round(room_id, from_human=from_human, picked=picked, room=turn.room)
    if not order:
        return order, options, None
    seat = next((s for s in seats if s.pk == order[0]), None)
    try:
        return order, options, begin(room_id, "reply", order[0], turn=turn, seat=seat, seats=seats)
    except REFUSED as exc:
        return order, options, exc
    except Seat.DoesNotExist:
        return order, options, services.ActionRefused("That seat is gone.")


class Rounds:
    """The rounds of one room in this process: who speaks next, and whether a person interrupted.

    Room events wait (`events.held`) while each reply is planned, until the provider has its request.
    """

    # Per event loop, keyed by the loop object (an id() may be reused by a later loop).
    _rooms: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, Rounds]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, room_id: int) -> None:
        self.room_id = room_id
        self.task: asyncio.Task | None = None
        self.interrupted = asyncio.Event()  # a person wrote: end the auto chain, start over
        self.picked: list[int] = []

    @classmethod
    def of(cls, room_id: int) -> Rounds:
        """Return the room's rounds in this event loop."""
        rooms = _rounds.setdefault(asyncio.get_running_loop(), {})
        found = rooms.get(room_id)
        if found is None:
            found = rooms[room_id] = cls(room_id)
        return found

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    async def ask(self, *, picked: list[int], before: Prepare | None) -> Variant | None:
        """Run a round for this request, or have the running one answer it once its reply is done."""
        if before is not None and self.running:
            await database_sync_to_async(_prepare)(self.room_id, before)
            before = None
        if self.running:
            # Checked again after any wait: the round answers this request once its reply is done.
            self.picked = list(picked)
            self.interrupted.set()
            return None
        first: asyncio.Future = asyncio.get_running_loop().create_future()
        self.picked = list(picked)
        self.interrupted.clear()
        self.task = keep(asyncio.create_task(self._run(first, before=before)))
        return await first

    async def _run(self, first: asyncio.Future, *, before: Prepare | None = None) -> None:
        """Run a person's round, then the auto chain (if on) until it is done, stopped or interrupted.

        A person writing during the chain ends it: their message gets its round, and the chain does
        not start again until a later message. `before` is for the first round. `first` gets the
        first reply's variant (None when there is none).
        """
        started = time.time()
        auto_done = 0
        from_human = True
        auto_allowed = True
        try:
            while True:
                self.interrupted.clear()
                picked, self.picked = self.picked, []
                reply = None
                async with events.held():
                    # One trip to the database saves the person's message (`before`), picks the
                    # speakers and opens the first one's reply.
                    try:
                        order, options, opened = await database_sync_to_async(open_round)(
                            self.room_id, from_human=from_human, picked=picked, before=before
                        )
                    except NotPrepared as exc:
                        opened = exc
                    else:
                        if isinstance(opened, tuple):
                            reply = self._reply(first, *opened)
                            await reply.sent()
                if isinstance(opened, NotPrepared):
                    if not first.done():
                        first.set_exception(opened.__cause__)
                    return
                before = None
                if isinstance(opened, Exception):
                    await notice(self.room_id, str(opened))
                    return
                if not order and not first.done():
                    await notice(
                        self.room_id, "Nobody was picked to answer. Name a character or ask one to speak."
                    )
                outcome = await self._speak_in_turn(order, first, reply)
                if outcome == "interrupted":
                    auto_allowed = auto_allowed and from_human
                    from_human, auto_done = True, 0
                    continue
                if outcome != "done" or not order or await stop.requested(self.room_id, started):
                    return
                if not auto_allowed or not speakers.auto_continues(
                    rounds_done=auto_done, max_rounds=options.auto_turns
                ):
                    return
                try:
                    await asyncio.wait_for(self.interrupted.wait(), timeout=options.auto_delay)
                except TimeoutError:
                    from_human, auto_done = False, auto_done + 1
                else:
                    from_human, auto_done, auto_allowed = True, 0, False
                if await stop.requested(self.room_id, started):
                    return
        finally:
            if not first.done():
                first.set_result(None)
            this = asyncio.current_task()
            if self.interrupted.is_set() and self.task is this and not this.cancelling():
                # Someone asked for a reply after this round last looked (while it was ending): their
                # message gets a round of its own, as if it had come a moment later.
                loop = asyncio.get_running_loop()
                self.task = keep(loop.create_task(self._run(loop.create_future())))

    @staticmethod
    def _reply(first: asyncio.Future, variant: Variant, plan: TurnPlan) -> Reply:
        if not first.done():
            first.set_result(variant)
        return Reply(variant, plan)

    async def _speak_in_turn(
        self, order: list[int | None], first: asyncio.Future, reply: Reply | None
    ) -> str:
        """Let each speaker answer in turn, each seeing the previous one's committed reply.

        `reply` is the first speaker's, already sent.
        """
        for position, seat_id in enumerate(order):
            if position > 0:
                if self.interrupted.is_set():
                    return "interrupted"
                refusal = None
                async with events.held():
                    try:
                        opened = await database_sync_to_async(begin)(self.room_id, "reply", seat_id)
                    except REFUSED as exc:
                        refusal = str(exc)
                    except Seat.DoesNotExist:
                        refusal = "That seat is gone."
                    else:
                        reply = self._reply(first, *opened)
                        await reply.sent()
                if refusal is not None:
                    await notice(self.room_id, refusal)
                    return "failed"
            if await reply.finished() != Variant.State.DONE:
                return "failed"
        return "interrupted" if self.interrupted.is_set() else "done"


# Per event loop, keyed by the loop object (an id() may be reused by a later loop).
_rounds: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, Rounds]] = weakref.WeakKeyDictionary()


async def _single(room_id: int, mode: str, opened: asyncio.Future) -> None:
    """Rework the last reply ("regenerate" or "continue"); `opened` gets its variant, or None."""
    refusal = None
    try:
        async with events.held():
            try:
                variant, plan = await database_sync_to_async(begin)(room_id, mode)
            except REFUSED as exc:
                refusal = str(exc)
            else:
                reply = Reply(variant, plan)
                opened.set_result(variant)
                await reply.sent()
    except Exception as exc:
        if opened.done():
            raise
        opened.set_exception(exc)
        return
    if refusal is not None:
        await notice(room_id, refusal)
        opened.set_result(None)


async def start_turn(
    room_id: int,
    mode: str = "reply",
    *,
    picked: list[int] | None = None,
    before: Prepare | None = None,
) -> Variant | None:
    """Answer in the room: "reply" runs a round (every speaker the turn order picks, one after
    another); "regenerate" and "continue" rework the last reply. Refusals become room notices.

    `before(turn)` ("reply" only) runs first, in the round's first trip to the database: the
    person's message is saved there. What it raises is raised here, and no round runs.

    A person's message while a round runs ends the auto chain and starts a new round for it once
    the current reply is done, so nothing is refused or lost.
    """
    if mode != "reply":
        opened: asyncio.Future = asyncio.get_running_loop().create_future()
        keep(asyncio.create_task(_single(room_id, mode, opened)))
        return await opened
    return await Rounds.of(room_id).ask(picked=picked or [], before=before)
