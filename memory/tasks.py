"""Background memory work. Tasks take ids and call services; retries and limits live here.

One room's memory is written by one task at a time (a Redis lock). A request that arrives while
the room is locked leaves a "dirty" mark; the holder runs again before it lets go, so nothing is
missed and nothing runs twice at once. Every task is safe to run again (acks_late).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from redis.exceptions import LockError, LockNotOwnedError
from redis.lock import Lock

from memory import jobs, runmodes, selectors
from memory.models import VectorIndex
from memory.services import catch_up as passes
from memory.services import cycle, indexing, runs
from memory.services.summaries import ProviderTrouble
from orbchat import redis
from orbchat.connections.embedding import EmbedderFailed
from rooms import events
from rooms.models import Room

log = logging.getLogger(__name__)


class LockLost(Exception):
    """Another run took the room while this one was in a step longer than the lock's life."""


def _heartbeat(lock: Lock, ttl: int) -> Callable[[], None]:
    """Keep `lock` for `ttl` more seconds; take it again if a slow step outlived it.

    One step can outlast the lock (loading the embedding model in a cold worker, a slow model
    call): when nobody took the room meanwhile, the run takes the lock again and goes on;
    otherwise it stops (`LockLost`) and leaves the room to the run that has it.
    """

    def beat() -> None:
        try:
            lock.extend(ttl, replace_ttl=True)
        except LockNotOwnedError:
            if not lock.acquire(blocking=False):
                raise LockLost() from None

    return beat


def locked_runs(room_id: int, work: Callable[[Callable[[], None]], object]) -> bool:
    """Run `work` for the room under its lock, again while new requests arrived; False if busy.

    `work` gets a heartbeat to call as it goes: the lock lives MEMORY_LOCK_TTL seconds past the
    last beat, so a killed worker's lock soon expires and the next run catches up. A run that
    loses the room to another mid-way also answers False: the other run carries on.
    """
    ttl = settings.MEMORY_LOCK_TTL
    client = redis.sync_client()
    client.set(redis.memory_dirty_key(room_id), "1", ex=max(ttl, 60))
    ran = False
    # A request may mark the room dirty just after the holder's last look and just before it
    # lets go; looking once more after releasing closes that gap.
    while client.exists(redis.memory_dirty_key(room_id)):
        lock = client.lock(redis.memory_lock_key(room_id), timeout=ttl, blocking=False)
        if not lock.acquire():
            return ran  # the holder sees the dirty mark and runs again
        lost = False
        try:
            while client.getdel(redis.memory_dirty_key(room_id)):
                work(_heartbeat(lock, ttl))
                ran = True
        except LockLost:
            lost = True
            log.warning("memory lock of room %s was taken by another run; leaving the room to it", room_id)
            # What this run missed, the other does.
            client.set(redis.memory_dirty_key(room_id), "1", ex=max(ttl, 60))
            return False
        finally:
            if not lost:  # a lost lock is the other run's now
                try:
                    lock.release()
                except LockError:
                    log.warning("memory lock of room %s expired while working", room_id)
    return ran


def _notify_user(user_id: int, text: str) -> None:
    events.user_notice(user_id, text)


def _notify_host(room_id: int, text: str) -> None:
    room = Room.objects.filter(pk=room_id).only("host_id", "title").first()
    if room is not None:
        events.user_notice(room.host_id, f"Memory for “{room.title}”: {text}")


class _CyclePusher:
    """Show the host a room's running memory cycle: its stages, the Utility model's tokens and
    speed, and its text as it streams; at most every CYCLE_PUSH_SECONDS, stages and the end at once.
    """

    def __init__(self, room_id: int) -> None:
        self.room_id = room_id
        self.host_id = Room.objects.filter(pk=room_id).values_list("host_id", flat=True).first()
        self.meter = runmodes.Meter()
        self.stage_name, self.done, self.total = "summaries", 0, 0
        self.stages: dict[str, list[int]] = {}  # every stage so far: name -> [done, total]
        self.unsent: list[str] = []
        self.shown = ""  # all the output pushed so far (its tail is kept for a page opened later)
        self.last = 0.0

    def stage(self, name: str, done: int, total: int) -> None:
        self.stage_name, self.done, self.total = name, done, total
        self.stages[name] = [done, total]
        self.push("running", now=True)

    def text(self, piece: str) -> None:
        clock = time.monotonic()
        if not piece:
            self.meter.call(clock)
        self.meter.piece(piece, clock)
        self.unsent.append(piece)
        self.push("running")

    def push(self, state: str, *, now: bool = False) -> None:
        clock = time.monotonic()
        if self.host_id is None or (not now and clock - self.last < CYCLE_PUSH_SECONDS):
            return
        self.last = clock
        text, self.unsent = "".join(self.unsent), []
        self.shown = (self.shown + text)[-runs.STATE_TEXT :]
        event = {
            "type": "user.memory",
            "room": self.room_id,
            "kind": "cycle",
            "state": state,
            "stage": self.stage_name,
            "done": self.done,
            "total": self.total,
            "tokens": self.meter.tokens,
            "speed": round(self.meter.speed(), 1),
            "text": text,
        }
        events.to_user_now(self.host_id, event, on_commit=False)
        runs.cycle_state_save(
            self.room_id,
            {**event, "text": self.shown, "stages": [[n, *counts] for n, counts in self.stages.items()]},
        )


CYCLE_PUSH_SECONDS = 0.25


def _cycle(room_id: int, beat: Callable[[], None], **options) -> None:
    """One memory pass of the room, shown to its host as it runs; Cancel stops it between calls."""
    push = _CyclePusher(room_id)
    push.stage("scene", 0, 1)
    cycle.scene_note_refresh(room_id, on_text=push.text)
    push.stage("scene", 1, 1)
    beat()
    try:
        report = passes.catch_up(
            room_id,
            progress=lambda *_: beat(),
            cancelled=lambda: runs.cycle_cancelled(room_id),
            on_stage=push.stage,
            on_text=push.text,
            **options,
        )
    except ProviderTrouble:
        push.push("failed", now=True)
        raise
    for notice in report.notices:
        _notify_host(room_id, notice)
    push.push("cancelled" if runs.cycle_cancelled(room_id) else "done", now=True)
    runs.cycle_ended(room_id)


@shared_task(
    name=jobs.CATCH_UP,
    bind=True,
    acks_late=True,
    soft_time_limit=600,
    time_limit=660,
    max_retries=None,
    queue=jobs.QUEUE,
)
def catch_up(self, room_id: int) -> None:
    """Read the scene note again, then summarise, write facts and index whatever is due in the room."""
    backoff = settings.MEMORY_RETRY_BACKOFF

    try:
        locked_runs(room_id, lambda beat: _cycle(room_id, beat))
    except ProviderTrouble as exc:
        if exc.retriable and self.request.retries < len(backoff):
            raise self.retry(countdown=backoff[self.request.retries]) from exc
        # Out of retries (or a failure that will not pass by itself): write offline, tell the host.
        locked_runs(room_id, lambda beat: _cycle(room_id, beat, on_provider_error="fallback"))
        _notify_host(
            room_id,
            f"the Utility model failed ({exc}); summaries were written by the built-in summariser "
            "and will be upgraded by a backfill once it works.",
        )
    except EmbedderFailed as exc:
        _notify_host(room_id, f"your library couldn't be indexed ({exc}). It will be retried.")
        raise self.retry(countdown=60, max_retries=3) from exc
    except SoftTimeLimitExceeded:
        log.warning("memory catch-up of room %s hit its time limit; the next run continues", room_id)


@shared_task(name=jobs.FORGET_VECTORS, acks_late=True, queue=jobs.QUEUE)
def forget_vectors(
    host_id: int, memory_ids: list[str], scene_ids: list[str], fact_ids: list[str] | None = None
) -> None:
    """Delete vectors of summaries, scenes and facts that no longer exist (or left the index)."""
    indexing.vectors_forget(host_id=host_id, memory_ids=memory_ids, scene_ids=scene_ids, fact_ids=fact_ids)


class _UserPusher:
    """Send progress of background work to one user's open tabs, at most a few times a second."""

    def __init__(self, user_id: int | None, what: str, room_id: int | None = None) -> None:
        self.host_id = user_id
        self.what = what
        self.room_id = room_id
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.host_id is None or (now - self.last < 0.3 and done < total):
            return
        self.last = now
        events.to_user_now(
            self.host_id,
            {"type": "user.progress", "what": self.what, "room": self.room_id, "done": done, "total": total},
            on_commit=False,
        )


@shared_task(
    name=jobs.BACKFILL,
    bind=True,
    acks_late=True,
    soft_time_limit=3600,
    time_limit=3660,
    max_retries=None,
    queue=jobs.QUEUE,
)
def backfill(self, room_id: int) -> None:
    """Build a room's whole memory with progress; cancellable; resumable by running again."""
    client = redis.sync_client()
    push = _UserPusher(
        Room.objects.filter(pk=room_id).values_list("host_id", flat=True).first(), "backfill", room_id
    )

    def work(beat) -> None:
        def progress(done: int, total: int) -> None:
            beat()
            push(done, total)

        cancel = redis.memory_cancel_key(room_id)
        passes.backfill(room_id, progress=progress, cancelled=lambda: bool(client.exists(cancel)))

    try:
        if not locked_runs(room_id, work):
            passes.backfill_queue(room_id=room_id)
            raise self.retry(countdown=2)  # a catch-up holds the room; the backfill follows it
    except ProviderTrouble as exc:
        if exc.retriable and self.request.retries < len(settings.MEMORY_RETRY_BACKOFF):
            passes.backfill_queue(room_id=room_id)
            raise self.retry(countdown=settings.MEMORY_RETRY_BACKOFF[self.request.retries]) from exc
        _notify_host(
            room_id, f"the backfill stopped: the Utility model failed ({exc}). Press it again later."
        )
    except SoftTimeLimitExceeded:
        _notify_host(room_id, "the backfill ran out of time; press it again to continue where it stopped.")


def backfill_start(room_id: int) -> None:
    """Queue a room's backfill; it continues where the last one stopped.

    A backfill that reads as interrupted lost its worker, which held the room's lock: the lock
    is let go now rather than when it expires (MEMORY_LOCK_TTL). Should that worker only have
    been slow, its next heartbeat finds the room taken and it leaves the work to this run.
    """
    client = redis.sync_client()
    client.delete(redis.memory_cancel_key(room_id))
    if selectors.backfill_progress(room_id)["phase"] == selectors.INTERRUPTED:
        client.delete(redis.memory_lock_key(room_id))
    passes.backfill_queue(room_id=room_id)
    backfill.delay(room_id)


def backfill_cancel(room_id: int) -> None:
    redis.sync_client().set(redis.memory_cancel_key(room_id), "1", ex=3600)


@shared_task(
    name=jobs.REINDEX,
    bind=True,
    acks_late=True,
    soft_time_limit=6 * 3600,
    time_limit=6 * 3600 + 60,
    queue=jobs.QUEUE,
)
def reindex(self, generation_id: int) -> None:
    """Index a host's whole library with a new embedding model; recall switches when it is done."""
    generation = VectorIndex.objects.filter(pk=generation_id).first()
    if generation is None:
        return
    push = _UserPusher(generation.user_id, "reindex")
    try:
        indexing.reindex(generation_id, progress=push)
    except EmbedderFailed as exc:
        _notify_user(
            generation.user_id, f"Re-indexing with the new embedding model failed ({exc}); retrying."
        )
        raise self.retry(countdown=60, max_retries=5) from exc
