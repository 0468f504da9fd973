"""A memory pass over one room: plan what is due, write it, drop what is obsolete, index the rest;
and the backfill, a pass that also upgrades extractive summaries, with progress.

A second run over the same room finds nothing to do; a run killed half-way is caught up by the next.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from memory import blocks, prompts
from memory.models import SHARED, RoomMemory, Summary, seat_scope
from memory.selectors import (
    block_tuning,
    forgotten_blocks,
    memory_on,
    message_seqs,
    personal_memory_on,
    tuning_get,
)
from memory.services.cycle import FactsCycle
from memory.services.indexing import index_room
from memory.services.summaries import OnText, ProviderTrouble, forget, write_summary
from orbchat.connections.selectors import model_roles_get
from rooms.models import Room, Seat

log = logging.getLogger(__name__)

# Blocks summarised before a catch-up that the Utility model reads for facts, per memory set, in
# one catch-up after a reply (those it summarises itself are all read).
MANAGER_BLOCKS_PER_RUN = 4

# Hears a cycle's stages: (name, done, total).
OnStage = Callable[[str, int, int], None]


@dataclass
class Report:
    written: int = 0
    deleted: int = 0
    indexed: int = 0
    scenes_indexed: int = 0
    summarise_s: float = 0.0  # time spent writing summaries
    index_memories_s: float = 0.0
    index_scenes_s: float = 0.0
    problems: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # for the host: answers the memory manager misread


def summary_states(room: Room, scope: str, *, upgrade: bool) -> dict[tuple[int, int], str]:
    """Each summary's state for the planner; a forgotten one counts as a person's (never rewritten)."""
    states = {(tier, block): "person" for scope_, tier, block in forgotten_blocks(room) if scope_ == scope}
    for tier, block, source, stale in Summary.objects.filter(room=room, scope=scope).values_list(
        "tier", "block", "source", "stale"
    ):
        if source == Summary.Source.PERSON:
            states[(tier, block)] = "person"
        elif stale or (upgrade and source == Summary.Source.EXTRACTIVE):
            states[(tier, block)] = "stale"
        else:
            states[(tier, block)] = "current"
    return states


def _scopes(
    room: Room, existing: list[int], t: blocks.Tuning
) -> list[tuple[str, str | None, set[int] | None]]:
    """Return (scope, point of view, witnessed tier-0 blocks) for the shared set and personal sets."""
    scopes: list[tuple[str, str | None, set[int] | None]] = [(SHARED, None, None)]
    if personal_memory_on(room) and existing:
        upto = existing[-1] + 1
        for seat in Seat.objects.filter(room=room).prefetch_related("presences"):
            intervals = [(p.joined_seq, p.left_seq) for p in seat.presences.all()]
            seen = blocks.witnessed_blocks(intervals, tier=0, t=t, upto=upto)
            if seen:
                scopes.append((seat_scope(seat.pk), seat.name, seen))
    return scopes


def catch_up(
    room_id: int,
    *,
    upgrade: bool = False,
    on_provider_error: str = "raise",
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    on_stage: OnStage | None = None,
    on_text: OnText | None = None,
) -> Report:
    """Bring a room's memory up to date: write what is due, drop what is obsolete, index the rest.

    `on_stage(name, done, total)` hears each stage as it goes ("summaries" n of m, "facts" for each
    memory set's blocks read by the memory manager, then "index");
    `on_text` gets the Utility model's answers as they stream. `cancelled` is asked before each
    summary: a cancelled run stops there, with every summary written so far whole.

    `upgrade` rewrites extractive summaries with the Utility model (backfill). With
    `on_provider_error="fallback"`, a failing Utility model is replaced by the extractive
    summariser for this run (the failure is in the report); with "raise" it raises ProviderTrouble.
    """
    report = Report()
    room = Room.objects.select_related("host").filter(pk=room_id).first()
    if room is None:
        return report
    tuning = tuning_get()
    if not memory_on(room, tuning):
        return report
    t = block_tuning(tuning)
    existing_seqs, visible = message_seqs(room)
    utility = model_roles_get(user=room.host).utility
    upgrade = upgrade and utility is not None

    scopes = _scopes(room, existing_seqs, t)
    plans = []
    for scope, pov, seen in scopes:
        states = summary_states(room, scope, upgrade=upgrade)
        plans.append(
            (
                scope,
                pov,
                blocks.plan(
                    existing_seqs=existing_seqs, visible_seqs=visible, summaries=states, t=t, only_blocks=seen
                ),
            )
        )
    total = sum(len(p.write) for _, _, p in plans)
    cycle = FactsCycle(
        room,
        fallback=on_provider_error != "raise",
        cancelled=cancelled,
        limit=None if upgrade else MANAGER_BLOCKS_PER_RUN,
        template=prompts.custom(tuning.custom_prompts, "manager"),
    )
    done = 0
    stage = on_stage or (lambda *_: None)
    stage("summaries", done, total)
    clock = time.perf_counter()
    for scope, pov, plan in plans:
        for tier, block in plan.write:
            if cancelled and cancelled():
                return report
            if progress:
                progress(done, total)  # also a sign of life before a slow model call
            try:
                summary = write_summary(
                    room=room,
                    scope=scope,
                    tier=tier,
                    block=block,
                    t=t,
                    pov=pov,
                    utility=utility,
                    on_text=on_text,
                )
            except ProviderTrouble as exc:
                if on_provider_error == "raise":
                    raise
                report.problems.append(str(exc))
                utility = None  # the rest of this run is written offline, and upgraded later
                summary = write_summary(
                    room=room, scope=scope, tier=tier, block=block, t=t, pov=pov, utility=None
                )
            report.written += summary is not None
            done += 1
            stage("summaries", done, total)
            if progress:
                progress(done, total)
        utility = cycle.manage(
            scope=scope,
            pov=pov,
            utility=utility,
            beat=partial(progress, done, total) if progress else None,
            on_block=partial(stage, "facts"),
            on_text=on_text,
            written=frozenset(block for tier, block in plan.write if tier == 0),
        )
        obsolete = plan.obsolete + plan.obsolete_person
        if obsolete:
            report.deleted += forget(room=room, scope=scope, blocks_=obsolete)
    cycle.finish(tuning)
    report.problems += cycle.problems
    report.notices += cycle.notices
    report.summarise_s = time.perf_counter() - clock
    beat = (lambda: progress(done, total)) if progress else None
    stage("index", 0, 1)
    indexed = index_room(room, fresh_start=plans[0][2].fresh_start, t=t, beat=beat)
    report.indexed = indexed.memories + indexed.scenes + indexed.facts
    report.scenes_indexed = indexed.scenes
    report.index_memories_s = indexed.memories_s
    report.index_scenes_s = indexed.scenes_s
    stage("index", 1, 1)
    RoomMemory.objects.update_or_create(
        room=room,
        defaults={
            "last_run_at": timezone.now(),
            "last_error": "; ".join(report.problems + report.notices)[:2000],
        },
    )
    return report


# Seconds between two heartbeats of a running backfill (selectors.BACKFILL_STALE_SECONDS is
# how old the last one may be before the backfill reads as interrupted).
BACKFILL_BEAT_SECONDS = 2.0


@transaction.atomic
def backfill_queue(*, room_id: int) -> None:
    """Mark a room's backfill as waiting for a worker; it is "running" once a worker starts it."""
    RoomMemory.objects.update_or_create(room_id=room_id, defaults={"backfill": RoomMemory.Backfill.QUEUED})


def _backfill_beat(room_id: int) -> None:
    RoomMemory.objects.filter(room_id=room_id).update(backfill_beat_at=timezone.now())


@contextmanager
def _backfill_alive(room_id: int) -> Iterator[None]:
    """Write the backfill's heartbeat every BACKFILL_BEAT_SECONDS while the block runs.

    A thread of its own beats, so a long model call or a slow index step still counts as alive,
    while a killed worker stops beating at once and the page soon reads "interrupted".
    """
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(BACKFILL_BEAT_SECONDS):
                try:
                    _backfill_beat(room_id)
                except DatabaseError as exc:
                    log.warning("backfill heartbeat of room %s not written (%s); next one soon", room_id, exc)
        finally:
            connections.close_all()  # this thread's own connection

    thread = threading.Thread(target=beat, name=f"backfill-beat-{room_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def backfill(
    room_id: int,
    *,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> Report:
    """Build (or upgrade) a room's whole memory: every due summary, extractive ones rewritten
    by the Utility model when there is one, and the index. Stopping half-way loses nothing: the
    next run starts where this one stopped.
    """
    RoomMemory.objects.update_or_create(
        room_id=room_id,
        defaults={
            "backfill": RoomMemory.Backfill.RUNNING,
            "backfill_done": 0,
            "backfill_beat_at": timezone.now(),
        },
    )

    saved = [0.0]

    def step(done: int, total: int) -> None:
        now = time.monotonic()
        if now - saved[0] >= 0.5 or done >= total:  # the page reads it; twice a second is plenty
            saved[0] = now
            RoomMemory.objects.filter(room_id=room_id).update(
                backfill_done=done, backfill_total=total, backfill_beat_at=timezone.now()
            )
        if progress:
            progress(done, total)

    with _backfill_alive(room_id):
        report = catch_up(room_id, upgrade=True, progress=step, cancelled=cancelled)
    stopped = cancelled is not None and cancelled()
    RoomMemory.objects.filter(room_id=room_id).update(
        backfill=RoomMemory.Backfill.CANCELLED if stopped else RoomMemory.Backfill.DONE
    )
    return report
