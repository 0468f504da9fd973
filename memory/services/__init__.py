"""Writes of memory: summaries (tier 0 and roll-ups), their staleness, and the vector index.

The work follows Zulip's queue-worker shape: read what is needed, call the model *outside* any
transaction, then lock the row, check it is still what was expected, and only then write. A
second run over the same room finds nothing to do; a run killed half-way is caught up by the next.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import DatabaseError, connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from memory import blocks, extractive, index, summarize
from memory.drafts import Draft, Line, render
from memory.models import SHARED, MemoryTuning, RoomMemory, Scene, Summary, SummaryKeyword, seat_scope
from orbchat.connections import gateway
from orbchat.connections.services import model_roles_get
from rooms.models import Message, Room, Seat, Variant
from rooms.options import room_options

log = logging.getLogger(__name__)

UTILITY_TIMEOUT = 60.0
# Provider answers worth trying again later (rate limits, overload, outages, timeouts).
RETRIABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}


class ProviderTrouble(Exception):
    """The Utility model failed; `retriable` says whether trying later may help."""

    def __init__(self, message: str, *, retriable: bool) -> None:
        super().__init__(message)
        self.retriable = retriable


def tuning_get() -> MemoryTuning:
    tuning, _ = MemoryTuning.objects.get_or_create(pk=1)
    return tuning


def block_tuning(tuning: MemoryTuning) -> blocks.Tuning:
    return blocks.Tuning(
        block_size=tuning.block_size,
        fresh_window=tuning.fresh_window,
        fan_in=tuning.fan_in,
        max_tier=tuning.max_tier,
    )


def memory_on(room: Room, tuning: MemoryTuning | None = None) -> bool:
    """Memory runs for a room when it is on for the site and its host wants it."""
    tuning = tuning or tuning_get()
    return tuning.enabled and room.host.remember_long_chats and room.archived_at is None


def personal_memory_on(room: Room) -> bool:
    """Each character gets its own set: Per-speaker replies with "only their own card"."""
    return room_options(room).own_cards


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


def _seqs(room: Room) -> tuple[list[int], list[int]]:
    """Every message number of the room, and those of the visible messages, both ascending.

    Planning runs after every reply, so this reads two columns of every message and nothing
    more (the text is read per block, when a block is written).
    """
    existing, visible = [], []
    for seq, hidden in Message.objects.filter(room=room).order_by("seq").values_list("seq", "hidden"):
        existing.append(seq)
        if not hidden:
            visible.append(seq)
    return existing, visible


def _lines(room: Room, start: int, end: int) -> list[Line]:
    """The visible, written messages of [start, end), as the summariser reads them."""
    rows = (
        Message.objects.filter(
            room=room,
            seq__gte=start,
            seq__lt=end,
            hidden=False,
            variants__index=F("active_index"),
            variants__state__in=[Variant.State.DONE, Variant.State.STOPPED],
        )
        .order_by("seq")
        .values_list("seq", "speaker_name", "variants__text", "created_at", "kind")
    )
    return [
        Line(seq=seq, speaker=speaker, text=text, when=when, is_human=kind == Message.Kind.HUMAN)
        for seq, speaker, text, when, kind in rows
        if text.strip()
    ]


def _hash(payload: object) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _summary_states(room: Room, scope: str, *, upgrade: bool) -> dict[tuple[int, int], str]:
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


def forgotten_blocks(room: Room) -> list[tuple[str, int, int]]:
    """The (scope, tier, block)s a person forgot in this room."""
    state = RoomMemory.objects.filter(room=room).values_list("forgotten", flat=True).first()
    return [(str(scope), int(tier), int(block)) for scope, tier, block in state or ()]


def _draft_of(summary: Summary) -> Draft:
    return Draft(heading=summary.heading, facts=list(summary.facts), keywords=list(summary.keywords))


def _utility_answer(target, messages: list[dict]) -> str:
    try:
        return gateway.complete(target, messages, timeout=UTILITY_TIMEOUT, temperature=0.2, max_tokens=600)
    except Exception as exc:  # noqa: BLE001 - classified and reported by the caller
        status = getattr(exc, "status_code", None)
        retriable = status in RETRIABLE_STATUS or status is None
        raise ProviderTrouble(gateway.plain_error(exc), retriable=retriable) from exc


def write_summary(
    *,
    room: Room,
    scope: str,
    tier: int,
    block: int,
    t: blocks.Tuning,
    pov: str | None,
    utility,
    upto: int | None = None,
) -> Summary | None:
    """Write (or rewrite) one summary; return it, or None when there was nothing to write.

    `utility` is the host's Utility connection, or None for the built-in extractive summariser.
    `upto` cuts a tier-0 block short (a person asked for it before the block filled): such a
    summary is written stale, so it is rewritten whole once the block is complete.
    """
    start, end = blocks.block_range(tier, block, t)
    partial = tier == 0 and upto is not None and upto < end
    if partial:
        end = upto
    if tier == 0:
        lines = _lines(room, start, end)
        if not lines:
            return None
        seq_from, seq_to = lines[0].seq, lines[-1].seq
        first_at, last_at = lines[0].when, lines[-1].when
        payload = [[line.seq, line.speaker, line.text] for line in lines]
        children: list[Summary] = []
    else:
        kids = [b for _, b in blocks.children(tier, block, t)]
        children = list(
            Summary.objects.filter(room=room, scope=scope, tier=tier - 1, block__in=kids).order_by("block")
        )
        if not children:
            return None
        seq_from, seq_to = children[0].seq_from, children[-1].seq_to
        first_at, last_at = children[0].first_at, children[-1].last_at
        payload = [[c.block, c.text] for c in children]
        lines = []
    source = Summary.Source.UTILITY if utility is not None else Summary.Source.EXTRACTIVE
    input_hash = _hash([source, utility.model if utility else "", pov, payload])

    existing = Summary.objects.filter(room=room, scope=scope, tier=tier, block=block).first()
    if existing and (
        existing.source == Summary.Source.PERSON
        or (existing.input_hash == input_hash and not existing.stale and not partial)
    ):
        return existing

    # The slow part, outside any transaction.
    if utility is not None:
        target = gateway.target_for(utility)
        if tier == 0:
            answer = _utility_answer(target, summarize.block_messages(lines, pov=pov, room_title=room.title))
            draft = summarize.parse(answer, fallback=lines)
        else:
            answer = _utility_answer(
                target, summarize.rollup_messages([_draft_of(c) for c in children], tier=tier, pov=pov)
            )
            draft = summarize.parse(answer)
    elif tier == 0:
        draft = extractive.summarise(lines, pov=pov)
    else:
        draft = extractive.roll_up([_draft_of(c) for c in children], times=[first_at, last_at])

    with transaction.atomic():
        current = (
            Summary.objects.select_for_update().filter(room=room, scope=scope, tier=tier, block=block).first()
        )
        if current and current.source == Summary.Source.PERSON:
            return current  # a person wrote it while the model was working: theirs wins
        values = {
            "seq_from": seq_from,
            "seq_to": seq_to,
            "heading": draft.heading,
            "facts": draft.facts,
            "keywords": draft.keywords,
            "text": render(draft),
            "source": source,
            "model": utility.model if utility else "",
            "input_hash": input_hash,
            "stale": partial,
            "first_at": first_at,
            "last_at": last_at,
        }
        if current is None:
            current = Summary.objects.create(room=room, scope=scope, tier=tier, block=block, **values)
        else:
            for name, value in values.items():
                setattr(current, name, value)
            current.save()
        keywords_index(summary=current)
        return current


def keyword_words(keywords: list[str]) -> list[tuple[str, str]]:
    """Return (casefolded word, keyword) for every word of every keyword (pure)."""
    pairs = []
    for keyword in keywords:
        for word in set(re.findall(r"\w+", keyword.casefold())):
            if len(word) >= 2:
                pairs.append((word[:100], keyword[:200]))
    return pairs


def keywords_index(*, summary: Summary) -> None:
    """Replace the summary's rows in the keyword lookup (call inside the transaction that saved it)."""
    SummaryKeyword.objects.filter(summary=summary).delete()
    SummaryKeyword.objects.bulk_create(
        [
            SummaryKeyword(summary=summary, room_id=summary.room_id, word=word, keyword=keyword)
            for word, keyword in keyword_words(list(summary.keywords or ()))
        ]
    )


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
) -> Report:
    """Bring a room's memory up to date: write what is due, drop what is obsolete, index the rest.

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
    existing_seqs, visible = _seqs(room)
    utility = model_roles_get(user=room.host).utility
    upgrade = upgrade and utility is not None

    scopes = _scopes(room, existing_seqs, t)
    plans = []
    for scope, pov, seen in scopes:
        states = _summary_states(room, scope, upgrade=upgrade)
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
    done = 0
    clock = time.perf_counter()
    for scope, pov, plan in plans:
        for tier, block in plan.write:
            if cancelled and cancelled():
                return report
            if progress:
                progress(done, total)  # also a sign of life before a slow model call
            try:
                summary = write_summary(
                    room=room, scope=scope, tier=tier, block=block, t=t, pov=pov, utility=utility
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
            if progress:
                progress(done, total)
        obsolete = plan.obsolete + plan.obsolete_person
        if obsolete:
            report.deleted += forget(room=room, scope=scope, blocks_=obsolete)
    report.summarise_s = time.perf_counter() - clock
    beat = (lambda: progress(done, total)) if progress else None
    index_room(room, fresh_start=plans[0][2].fresh_start, t=t, beat=beat, report=report)
    RoomMemory.objects.update_or_create(
        room=room,
        defaults={"last_run_at": timezone.now(), "last_error": "; ".join(report.problems)[:2000]},
    )
    return report


def forget(*, room: Room, scope: str, blocks_: list[tuple[int, int]]) -> int:
    """Delete summaries (and their vectors) of the given (tier, block)s in one scope."""
    match = Q()
    for tier, block in blocks_:
        match |= Q(tier=tier, block=block)
    doomed = list(Summary.objects.filter(match, room=room, scope=scope))
    if not doomed:
        return 0
    ids = [index.memory_id(s) for s in doomed]
    Summary.objects.filter(pk__in=[s.pk for s in doomed]).delete()
    index.delete_memories(index.live_generations(room.host), ids)
    return len(doomed)


def index_room(
    room: Room,
    *,
    fresh_start: int,
    t: blocks.Tuning,
    beat: Callable[[], None] | None = None,
    report: Report | None = None,
) -> int:
    """Embed what changed: summaries whose text is not indexed yet, and newly aged-out scenes."""
    report = report if report is not None else Report()
    generations = index.live_generations(room.host)
    clock = time.perf_counter()
    count = 0
    # Every summary's text is hashed, but only the changed ones are read as whole rows.
    changed = [
        pk
        for pk, text, indexed in Summary.objects.filter(room=room).values_list("pk", "text", "indexed_hash")
        if indexed != index.text_hash(text)
    ]
    for start in range(0, len(changed), index.BATCH):
        batch = list(Summary.objects.filter(pk__in=changed[start : start + index.BATCH]))
        for position, generation in enumerate(generations):
            _upsert_memories_into(generation, batch, required=position == 0)
        for summary in batch:
            Summary.objects.filter(pk=summary.pk, text=summary.text).update(
                indexed_hash=index.text_hash(summary.text)
            )
        count += len(batch)
        if beat:
            beat()
    report.index_memories_s = time.perf_counter() - clock
    clock = time.perf_counter()
    report.scenes_indexed = index_scenes(
        room, fresh_start=fresh_start, t=t, generations=generations, beat=beat
    )
    report.index_scenes_s = time.perf_counter() - clock
    report.indexed = count + report.scenes_indexed
    return report.indexed


def _upsert_memories_into(generation, batch: list[Summary], *, required: bool) -> None:
    """Embed and store summaries in one generation, with that generation's own model."""
    try:
        vectors = index.embed_for(generation, [s.text for s in batch])
    except index.EmbedderFailed:
        if required:
            raise
        return  # an older index whose model is gone: it retires once the new one is built
    index.upsert_memories(generation, batch, vectors)


def scene_text(lines: list[Line]) -> str:
    return "\n".join(f"#{line.seq} {line.speaker}: {line.text}" for line in lines)


def scene_transcript(scene: Scene) -> str:
    """The text the scenes index embeds for `scene`: its visible, written messages, one line each."""
    return scene_text(_lines(scene.room, scene.seq_from, scene.seq_to + 1))


def index_scenes(
    room: Room, *, fresh_start: int, t: blocks.Tuning, generations, beat: Callable[[], None] | None = None
) -> int:
    """Embed transcript chunks (one per tier-0 block) as they age out of the fresh window.

    A block whose chunk is indexed is not read again: a change to its messages clears the
    chunk's indexed hash (`messages_changed`, a new block size, a new host), so each run reads
    only new and changed blocks, not the whole chat.
    """
    last_block = fresh_start // t.block_size  # blocks before this one are complete
    known = {s.block: s for s in Scene.objects.filter(room=room)}
    todo: list[tuple[Scene, str, str]] = []
    for block in range(last_block):
        scene = known.get(block)
        if scene is not None and scene.indexed_hash and scene.indexed_hash == scene.text_hash:
            continue
        start, end = blocks.block_range(0, block, t)
        lines = _lines(room, start, end)
        if not lines:
            if scene is not None:
                index.delete_scenes(generations, [index.scene_id(room.pk, block)])
                scene.delete()
            continue
        text = scene_text(lines)
        digest = index.text_hash(text)
        if scene is not None and scene.indexed_hash == digest:
            continue
        speakers = ", ".join(dict.fromkeys(line.speaker for line in lines))
        scene, _ = Scene.objects.update_or_create(
            room=room,
            block=block,
            defaults={
                "seq_from": lines[0].seq,
                "seq_to": lines[-1].seq,
                "text_hash": digest,
                "first_at": lines[0].when,
            },
        )
        todo.append((scene, text, speakers))
    for start in range(0, len(todo), index.BATCH):
        batch = todo[start : start + index.BATCH]
        texts = [text for _, text, _ in batch]
        for generation in generations:
            try:
                vectors = index.embed_for(generation, texts)
            except index.EmbedderFailed:
                if generation is not generations[0]:
                    continue  # an older index whose model is gone: it retires once the new one is built
                raise
            index.upsert_scenes(
                generation, [s for s, _, _ in batch], texts, [p for _, _, p in batch], vectors
            )
        Scene.objects.filter(pk__in=[s.pk for s, _, _ in batch]).update(indexed_hash=F("text_hash"))
        if beat:
            beat()
    return len(todo)


# Keeping memory true when messages change -------------------------------------------------------


def messages_changed(*, room_id: int, seqs: list[int]) -> None:
    """Mark the summaries over these messages (and the roll-ups above them) stale; rewrite later.

    Call inside the transaction that changed the messages; the rewrite is enqueued on commit.
    Person-written summaries are never marked: they are never rewritten automatically.
    """
    if not seqs:
        return
    touched = blocks.blocks_touching(seqs, block_tuning(tuning_get()))
    match = Q()
    for tier, block in touched:
        match |= Q(tier=tier, block=block)
    Summary.objects.filter(match, room_id=room_id).exclude(source=Summary.Source.PERSON).update(stale=True)
    # Their transcript chunks are read and embedded again by the next catch-up.
    chunks = {block for tier, block in touched if tier == 0}
    Scene.objects.filter(room_id=room_id, block__in=chunks).update(indexed_hash="")
    enqueue_catch_up(room_id)


def messages_rewound(*, room_id: int, from_seq: int) -> None:
    """Everything from `from_seq` on was deleted: summaries and scenes reaching into it go at once.

    Those blocks no longer exist as they were; they are written again once they fill up anew.
    """
    doomed = list(Summary.objects.filter(room_id=room_id, seq_to__gte=from_seq).exclude(tier=Summary.ADDED))
    _clip_added(room_id, from_seq)
    _unforget(room_id, lambda tier, block: blocks.block_range(tier, block, _t())[1] > from_seq)
    scenes = list(Scene.objects.filter(room_id=room_id, seq_to__gte=from_seq))
    host_id = Room.objects.filter(pk=room_id).values_list("host_id", flat=True).first()
    memory_ids = [index.memory_id(s) for s in doomed]
    scene_ids = [index.scene_id(room_id, s.block) for s in scenes]
    Summary.objects.filter(pk__in=[s.pk for s in doomed]).delete()
    Scene.objects.filter(pk__in=[s.pk for s in scenes]).delete()
    if memory_ids or scene_ids:
        transaction.on_commit(lambda: _forget_vectors_later(host_id, memory_ids, scene_ids))
    messages_changed(room_id=room_id, seqs=[from_seq])


def _t() -> blocks.Tuning:
    return block_tuning(tuning_get())


def _clip_added(room_id: int, from_seq: int) -> None:
    """Added memories outlive a rewind (they are a person's), tied only to messages that remain."""
    Summary.objects.filter(room_id=room_id, tier=Summary.ADDED, seq_from__gte=from_seq).update(
        seq_from=None, seq_to=None
    )
    Summary.objects.filter(room_id=room_id, tier=Summary.ADDED, seq_to__gte=from_seq).update(
        seq_to=from_seq - 1
    )


def _unforget(room_id: int, which: Callable[[int, int], bool]) -> int:
    """Drop the forgotten marks of the (tier, block)s `which` picks; return how many went."""
    state = RoomMemory.objects.select_for_update().filter(room_id=room_id).first()
    if state is None or not state.forgotten:
        return 0
    kept = [mark for mark in state.forgotten if not which(int(mark[1]), int(mark[2]))]
    dropped = len(state.forgotten) - len(kept)
    if dropped:
        state.forgotten = kept
        state.save(update_fields=["forgotten", "updated_at"])
    return dropped


def _forget_vectors_later(host_id: int, memory_ids: list[str], scene_ids: list[str]) -> None:
    from memory import tasks

    _send(lambda: tasks.forget_vectors.delay(host_id, memory_ids, scene_ids))


def room_rehosted(*, room_id: int, old_host_id: int) -> None:
    """The room has a new host: move its memory into the new host's index.

    Vectors live in their host's collections, embedded with that host's model: the old host's
    copies go, and the worker embeds the room's memories and scenes again for the new host
    (with the new host's model). Call inside the transaction that changed the host.
    """
    memory_ids, scene_ids = room_vector_ids(room_id)
    Summary.objects.filter(room_id=room_id).update(indexed_hash="")
    Scene.objects.filter(room_id=room_id).update(indexed_hash="")
    transaction.on_commit(lambda: _forget_vectors_later(old_host_id, memory_ids, scene_ids))
    enqueue_catch_up(room_id)


def room_vector_ids(room_id: int) -> tuple[list[str], list[str]]:
    """The ids of a room's memories and scenes in the vector index."""
    summaries = Summary.objects.filter(room_id=room_id).only("room_id", "scope", "tier", "block")
    blocks_ = Scene.objects.filter(room_id=room_id).values_list("block", flat=True)
    return [index.memory_id(s) for s in summaries], [index.scene_id(room_id, b) for b in blocks_]


def enqueue_catch_up(room_id: int) -> None:
    """Ask the worker to catch the room's memory up, once the current transaction commits."""
    from memory import tasks

    transaction.on_commit(lambda: _send(lambda: tasks.catch_up.delay(room_id)))


def _send(publish: Callable[[], object]) -> None:
    try:
        publish()
    except Exception:  # noqa: BLE001 - a broker hiccup must not break the reply; the next one retries
        log.exception("could not enqueue memory work")


# Settings ----------------------------------------------------------------------------------------


@transaction.atomic
def tuning_update(*, form) -> MemoryTuning:
    """Save validated Memory tuning (a ModelForm over the one row).

    A new block size cuts every chat's transcript chunks anew: each is read again on the next
    catch-up (`index_scenes`).
    """
    before = tuning_get().block_size
    tuning = form.save()
    if tuning.block_size != before:
        Scene.objects.update(indexed_hash="")
    return tuning


@transaction.atomic
def remember_set(*, user, on: bool) -> None:
    from django.contrib.auth import get_user_model

    get_user_model().objects.filter(pk=user.pk).update(remember_long_chats=on)


# Backfill ----------------------------------------------------------------------------------------

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


# Re-indexing after the embedding model changed -----------------------------------------------


def reindex(generation_id: int, *, progress: Callable[[int, int], None] | None = None) -> bool:
    """Fill a building generation with every summary and scene of its host, then switch to it.

    Resumable: what the new collections already hold is skipped. Return True when it switched.
    """
    from memory.models import VectorIndex

    generation = VectorIndex.objects.select_related("user").filter(pk=generation_id).first()
    if generation is None or generation.state != VectorIndex.State.BUILDING:
        return False
    if generation.model_key != index.model_key(generation.user):
        return False  # the model changed again; that newer generation does the work
    user = generation.user
    summaries = list(Summary.objects.filter(room__host=user).order_by("pk"))
    scenes = list(Scene.objects.filter(room__host=user).select_related("room").order_by("pk"))
    total = len(summaries) + len(scenes)
    VectorIndex.objects.filter(pk=generation.pk).update(total=total)
    memories = index._collection(generation, "memories")
    scene_store = index._collection(generation, "scenes")
    done = 0
    for start in range(0, len(summaries), index.BATCH):
        batch = summaries[start : start + index.BATCH]
        have = set(memories.get(ids=[index.memory_id(s) for s in batch], include=[])["ids"])
        todo = [s for s in batch if index.memory_id(s) not in have]
        if todo:
            index.upsert_memories(generation, todo, index.embed_for(generation, [s.text for s in todo]))
        done += len(batch)
        VectorIndex.objects.filter(pk=generation.pk).update(done=done)
        if progress:
            progress(done, total)
    for start in range(0, len(scenes), index.BATCH):
        batch = scenes[start : start + index.BATCH]
        have = set(
            scene_store.get(ids=[index.scene_id(s.room_id, s.block) for s in batch], include=[])["ids"]
        )
        todo = [s for s in batch if index.scene_id(s.room_id, s.block) not in have]
        texts, speakers = [], []
        for scene in todo:
            lines = _lines(scene.room, scene.seq_from, scene.seq_to + 1)
            texts.append(scene_text(lines))
            speakers.append(", ".join(dict.fromkeys(line.speaker for line in lines)))
        if todo:
            index.upsert_scenes(generation, todo, texts, speakers, index.embed_for(generation, texts))
        done += len(batch)
        VectorIndex.objects.filter(pk=generation.pk).update(done=done)
        if progress:
            progress(done, total)
    with transaction.atomic():
        retired = list(
            VectorIndex.objects.select_for_update()
            .filter(user=user, state=VectorIndex.State.READY)
            .exclude(pk=generation.pk)
        )
        VectorIndex.objects.filter(pk__in=[g.pk for g in retired]).update(state=VectorIndex.State.RETIRED)
        VectorIndex.objects.filter(pk=generation.pk).update(
            state=VectorIndex.State.READY, finished_at=timezone.now(), done=total
        )
    for old in retired:
        index.drop_generation(old)
    return True
