"""Reads of memory."""

from __future__ import annotations

import math
from datetime import datetime

from django.db.models import Count, F, Max, Q
from django.utils import timezone

from memory import blocks, index, tiermap
from memory.drafts import Line
from memory.facts import HOT, SceneNote, render_scene_note
from memory.models import (
    SHARED,
    Fact,
    MemoryTuning,
    RecallLog,
    RoomMemory,
    Scene,
    Summary,
    VectorIndex,
    seat_scope,
)
from orbchat.connections import embedder, embedding
from orbchat.connections.selectors import model_roles_get
from rooms import permissions
from rooms.models import Message, Presence, Room, Seat, Variant
from rooms.options import room_options


def tuning_get() -> MemoryTuning:
    """The site's Memory tuning; the defaults until an administrator saves it."""
    return MemoryTuning.objects.filter(pk=1).first() or MemoryTuning(pk=1)


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


def summariser_status(user) -> dict:
    """Who writes `user`'s summaries: their Utility model, or the built-in summariser (and their
    Chat model, which one click can make their Utility one)."""
    roles = model_roles_get(user=user)
    return {"builtin": roles.utility_id is None, "chat": roles.chat}


def builtin_rewrite(room: Room) -> dict | None:
    """The host's offer to rewrite a room's built-in summaries with their Utility model.

    None unless memory runs for the room, the host has a Utility model and some of the room's
    summaries were written by the built-in summariser. The rewrite is the room's backfill, so the
    offer carries its progress: a queued or running one shows instead of the button.
    """
    if not memory_on(room):
        return None
    utility = model_roles_get(user=room.host).utility
    if utility is None:
        return None
    count = Summary.objects.filter(room=room, source=Summary.Source.EXTRACTIVE).count()
    if not count:
        return None
    return {"count": count, "utility": utility, "backfill": backfill_progress(room.pk)}


def personal_memory_on(room: Room) -> bool:
    """Each character gets its own set: Per-speaker replies with "only their own card"."""
    return room_options(room).own_cards


def forgotten_blocks(room: Room) -> list[tuple[str, int, int]]:
    """The (scope, tier, block)s a person forgot in this room."""
    state = RoomMemory.objects.filter(room=room).values_list("forgotten", flat=True).first()
    return [(str(scope), int(tier), int(block)) for scope, tier, block in state or ()]


def message_seqs(room: Room) -> tuple[list[int], list[int]]:
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


def message_lines(room: Room, start: int, end: int) -> list[Line]:
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


# The vector index's generations ------------------------------------------------------------------


def live_generations(user) -> list[VectorIndex]:
    """The generations writes go to, newest first: the current model's, and a still-ready older one.

    Only what exists: `services.indexing.generations_ensure` makes the current model's.
    """
    return list(VectorIndex.objects.filter(user=user).exclude(state=VectorIndex.State.RETIRED))


def has_vectors(user) -> bool:
    """Whether the user has an index at all (a first one is made on first use, not here)."""
    return VectorIndex.objects.filter(user=user).exists()


def memory_model_warming(host) -> bool:
    """Whether the model that embeds the host's recall is still warming up in this process (the
    built-in one loads in the background after a start; a connection's model needs no warming)."""
    if embedder.state() != "loading":
        return False
    generation = reading_generation(host)
    key = generation.model_key if generation else embedding.model_key(host)
    return key == embedding.BUILTIN_KEY


def reading_generation(user) -> VectorIndex | None:
    """The generation recall and search read: the newest ready one."""
    return (
        VectorIndex.objects.filter(user=user, state=VectorIndex.State.READY)
        .order_by("-created_at", "-pk")
        .first()
    )


def room_vector_ids(room_id: int) -> tuple[list[str], list[str]]:
    """The ids of a room's memories and scenes in the vector index."""
    summaries = Summary.objects.filter(room_id=room_id).only("room_id", "scope", "tier", "block")
    blocks_ = Scene.objects.filter(room_id=room_id).values_list("block", flat=True)
    return [index.memory_id(s) for s in summaries], [index.scene_id(room_id, b) for b in blocks_]


# Backfill ----------------------------------------------------------------------------------------

# Seconds a running backfill's heartbeat may age before the backfill reads as interrupted: a
# few missed beats (services.catch_up.BACKFILL_BEAT_SECONDS apart), not one slow database write.
BACKFILL_STALE_SECONDS = 8.0
INTERRUPTED = "interrupted"


def backfill_phase(
    *, state: str, beat_at: datetime | None, now: datetime, stale_after: float = BACKFILL_STALE_SECONDS
) -> str:
    """Return what a backfill reads as: its saved state, or "interrupted" for a running one whose
    worker stopped beating (killed, or its machine restarted)."""
    if state != RoomMemory.Backfill.RUNNING:
        return state
    if beat_at is None or (now - beat_at).total_seconds() > stale_after:
        return INTERRUPTED
    return state


def backfill_progress(room_id: int) -> dict:
    """A room's backfill as its page shows it: phase ("idle", "queued", "running",
    "interrupted", "cancelled", "done"), done and total."""
    return _backfill_progress(RoomMemory.objects.filter(room_id=room_id).first())


def _backfill_progress(state: RoomMemory | None) -> dict:
    if state is None:
        return {"phase": RoomMemory.Backfill.IDLE, "done": 0, "total": 0}
    phase = backfill_phase(state=state.backfill, beat_at=state.backfill_beat_at, now=timezone.now())
    return {"phase": phase, "done": state.backfill_done, "total": state.backfill_total}


def room_memory_status(room) -> dict:
    """What the host sees about a room's memory: counts by tier, stale, the last problem, a backfill."""
    by_tier = dict(
        Summary.objects.filter(room=room, scope="shared")
        .values_list("tier")
        .annotate(n=Count("pk"))
        .order_by("tier")
    )
    state = RoomMemory.objects.filter(room=room).first()
    return {
        "by_tier": sorted(by_tier.items()),
        "total": sum(by_tier.values()),
        "stale": Summary.objects.filter(room=room, stale=True).count(),
        "extractive": Summary.objects.filter(room=room, source=Summary.Source.EXTRACTIVE).count(),
        "state": state,
        "backfill": _backfill_progress(state),
    }


def reindex_status(user):
    """The generation being built for a new embedding model, if any (with done/total)."""
    return VectorIndex.objects.filter(user=user, state=VectorIndex.State.BUILDING).order_by("-pk").first()


def recall_last(room):
    """The latest recall log of the room (a reply's real count), or None."""
    logs = RecallLog.objects.filter(room=room)
    if room.host_since is not None:  # the turns before a hand-off were the previous host's
        logs = logs.filter(created_at__gte=room.host_since)
    return logs.order_by("-created_at", "-pk").first()


def context_used(room, viewer, variant_id: int) -> dict:
    """What memory sent with one reply (the variant), for `viewer`: everyone in the room gets the
    counts of each kind; only the host gets the detail (kinds, ids, scores, why each was picked).

    {"found": False} when no recall ran for that reply (or it ran under an earlier host).
    """
    logs = RecallLog.objects.filter(room=room, variant_id=variant_id)
    if room.host_since is not None:  # the turns before a hand-off were the previous host's
        logs = logs.filter(created_at__gte=room.host_since)
    log = logs.order_by("-created_at", "-pk").first()
    if log is None:
        return {"found": False, "counts": {}, "detail": None}
    detail = log.detail or {}
    counts = {
        "summaries": len(detail.get("kept", ())),
        "facts": len(detail.get("facts", ())),
        "quotes": len(detail.get("quotes", ())),
        "scene": 1 if detail.get("scene") else 0,
    }
    host = permissions.standing(viewer, room) == permissions.HOST
    return {
        "found": True,
        "state": log.state,
        "counts": counts,
        "total": sum(counts.values()),
        "detail": detail if host else None,
    }


# The Memory panel ------------------------------------------------------------------------------

PAGE_SIZE = 50
FILTERS = {
    "all": "All",
    "yours": "Yours",
    "pinned": "Pinned",
    "stale": "Stale",
    "added": "Added",
}


def memory_list(room, *, q: str = "", tier: int | None = None, show: str = "all"):
    """A room's memories for the panel and the API, newest stretch first: added ones, then each
    summary by tier (deepest first) and block. `q` matches words of the text or keywords."""
    rows = Summary.objects.filter(room=room)
    if tier is not None:
        rows = rows.filter(tier=tier)
    if show == "yours":
        rows = rows.filter(source=Summary.Source.PERSON)
    elif show == "pinned":
        rows = rows.filter(pinned=True)
    elif show == "stale":
        rows = rows.filter(stale=True)
    elif show == "added":
        rows = rows.filter(tier=Summary.ADDED)
    for word in q.split()[:8]:
        rows = rows.filter(Q(text__icontains=word) | Q(heading__icontains=word))
    return rows.order_by("-tier", "-block", "scope")


def memory_room_id(summary_id: int) -> int | None:
    """The room a memory belongs to (permissions are checked on the room), or None."""
    return Summary.objects.filter(pk=summary_id).values_list("room_id", flat=True).first()


def memory_get(room, summary_id: int) -> Summary | None:
    return Summary.objects.filter(room=room, pk=summary_id).first()


def memory_messages(room, summary: Summary, *, limit: int = 200) -> list[dict]:
    """The messages a memory covers (what the room holds of them now), oldest first."""
    return _messages_between(room, summary.seq_from, summary.seq_to, limit=limit)


def _messages_between(room, first: int | None, last: int | None, *, limit: int) -> list[dict]:
    if first is None:
        return []
    rows = (
        Message.objects.filter(
            room=room,
            seq__gte=first,
            seq__lte=last,
            variants__index=F("active_index"),
        )
        .order_by("seq")
        .values_list("seq", "speaker_name", "hidden", "variants__text")[:limit]
    )
    return [
        {"seq": seq, "speaker": speaker, "hidden": hidden, "text": text}
        for seq, speaker, hidden, text in rows
    ]


class SearchUnavailable(Exception):
    """The memory index could not be searched (the message says why)."""


def memory_search(room, *, q: str, limit: int = 10, min_score: float = 0.0) -> list[tuple[Summary, float]]:
    """The room's memories nearest to `q` by meaning, best first, each with its cosine similarity."""
    generation = reading_generation(room.host)
    if generation is None:
        return []
    try:
        vector = embedding.embed_with(generation.model_key, [q])[0]
        found = index.query_index(generation, "memories", vector, where={"room": room.pk}, n=limit)
    except embedding.EmbedderFailed as exc:
        raise SearchUnavailable(f"The memory index could not be searched: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - the vector store is unreachable
        raise SearchUnavailable(
            f"The memory index could not be searched: {exc or type(exc).__name__}"
        ) from exc
    wanted = {}
    for key, score in found:
        if score < min_score:
            continue
        _, _, scope, tier, block = key.split(":", 4)
        wanted[(scope, int(tier), int(block))] = score
    if not wanted:
        return []
    match = Q()
    for scope, tier, block in wanted:
        match |= Q(scope=scope, tier=tier, block=block)
    rows = {(s.scope, s.tier, s.block): s for s in Summary.objects.filter(match, room=room)}
    return [(rows[k], score) for k, score in wanted.items() if k in rows]


def memory_stats(rooms) -> dict:
    """Counts over the given rooms' memories: by tier, by room, stale, person-written, pinned."""
    rows = Summary.objects.filter(room__in=rooms)
    by_tier = dict(rows.values_list("tier").annotate(n=Count("pk")).order_by("tier"))
    by_room = dict(rows.values_list("room_id").annotate(n=Count("pk")).order_by("room_id"))
    return {
        "total": sum(by_tier.values()),
        "by_tier": {("added" if t == Summary.ADDED else str(t)): n for t, n in by_tier.items()},
        "by_room": {str(room): n for room, n in by_room.items()},
        "stale": rows.filter(stale=True).count(),
        "person_written": rows.filter(source=Summary.Source.PERSON).count(),
        "pinned": rows.filter(pinned=True).count(),
    }


def memory_gaps(room) -> dict:
    """What the shared memory does not cover: forgotten stretches (Rebuild brings them back) and
    the messages no tier-0 summary reaches yet (Generate next memory now)."""
    t = block_tuning(tuning_get())
    forgotten = []
    gone: set[int] = set()
    for scope, tier, block in sorted(forgotten_blocks(room), key=lambda m: (m[1], m[2])):
        if scope != "shared":
            continue
        start, end = blocks.block_range(tier, block, t)
        forgotten.append({"tier": tier, "block": block, "seq_from": start, "seq_to": end - 1})
        if tier == 0:
            gone.add(block)
    reached = sorted(
        Summary.objects.filter(room=room, scope="shared", tier=0).values_list("seq_from", "seq_to")
    )
    waiting, first, at = 0, None, 0
    for seq in Message.objects.filter(room=room).order_by("seq").values_list("seq", flat=True).iterator():
        while at < len(reached) and reached[at][1] < seq:
            at += 1
        inside = at < len(reached) and reached[at][0] <= seq
        if not inside and blocks.block_of(seq, 0, t) not in gone:
            waiting += 1
            first = seq if first is None else first
    return {"forgotten": forgotten, "unsummarised": waiting, "first": first}


def tier_map(room, *, detail: bool):
    """The tier map of the room's shared memory and added memories; with `detail` (the host
    only), the last reply's live window and recalled memories marked."""
    last = recall_last(room) if detail else None
    detail = last.detail if last is not None and last.state == "done" else {}
    recalled = {(k["scope"], k["tier"], k["block"]) for k in detail.get("kept", ())}
    marks = [
        tiermap.Mark(
            pk=s.pk,
            tier=s.tier,
            seq_from=s.seq_from,
            seq_to=s.seq_to,
            label=s.label,
            stale=s.stale,
            yours=s.yours,
            pinned=s.pinned,
            recalled=(s.scope, s.tier, s.block) in recalled,
        )
        for s in Summary.objects.filter(room=room, scope="shared", seq_from__isnull=False)
        .only("pk", "scope", "tier", "block", "seq_from", "seq_to", "stale", "source", "pinned")
        .order_by("tier", "seq_from")
    ]
    facts = [
        tiermap.FactMark(pk=pk, first_seq=first, last_seq=last, label=text, pinned=pinned)
        for pk, first, last, text, pinned in Fact.objects.filter(
            room=room, scope=SHARED, status=Fact.Status.ACTIVE, first_seq__isnull=False
        ).values_list("pk", "first_seq", "last_seq", "text", "pinned")
    ]
    newest = Message.objects.filter(room=room).aggregate(n=Max("seq"))["n"]
    return tiermap.layout(
        marks,
        messages=0 if newest is None else newest + 1,
        live_start=detail.get("live_start"),
        added_tier=Summary.ADDED,
        facts=facts,
    )


# Facts -------------------------------------------------------------------------------------------


def _witnessed_q(room: Room, seat: Seat) -> Q:
    """Facts inside the stretches `seat` was present for (any part of a block counts), or tied
    to no messages: the presence rule of personal memory, as a filter."""
    t = block_tuning(tuning_get())
    intervals = list(Presence.objects.filter(seat=seat).values_list("joined_seq", "left_seq"))
    seen = sorted(blocks.witnessed_blocks(intervals, tier=0, t=t, upto=room.next_seq))
    match = Q(first_seq__isnull=True)
    run_start = None
    for position, block in enumerate(seen):
        if run_start is None:
            run_start = block
        if position + 1 == len(seen) or seen[position + 1] != block + 1:
            start = blocks.block_range(0, run_start, t)[0]
            end = blocks.block_range(0, block, t)[1]
            match |= Q(first_seq__gte=start, last_seq__lt=end)
            run_start = None
    return match


def facts_for(
    room: Room,
    viewer,
    *,
    category: str | None = None,
    status: str | None = Fact.Status.ACTIVE,
    heat_min: float | None = None,
    heat_max: float | None = None,
):
    """The room's facts `viewer` may read, pinned first, then hottest, then newest.

    `viewer` is a person or a seat. The host reads every scope; a member (who speaks for no seat)
    reads the shared set only; anyone else nothing. A seat (a character about to speak) reads the
    shared set, and under personal memory also its own, of only the stretches it was present for.
    `status` None: every status.
    """
    rows = Fact.objects.filter(room=room)
    if isinstance(viewer, Seat):
        if viewer.room_id != room.pk:
            return rows.none()
        if personal_memory_on(room):
            rows = rows.filter(_witnessed_q(room, viewer), scope__in=[SHARED, seat_scope(viewer.pk)])
        else:
            rows = rows.filter(scope=SHARED)
    else:
        who = permissions.standing(viewer, room)
        if who is None:
            return rows.none()
        if who != permissions.HOST:
            rows = rows.filter(scope=SHARED)
    if category is not None:
        rows = rows.filter(category=category)
    if status is not None:
        rows = rows.filter(status=status)
    if heat_min is not None:
        rows = rows.filter(heat__gte=heat_min)
    if heat_max is not None:
        rows = rows.filter(heat__lte=heat_max)
    return rows.order_by("-pinned", "-heat", "-pk")


def fact_history(fact: Fact) -> list[Fact]:
    """Every version of a fact, oldest first: the facts linked to it by corrections, either way."""
    known: dict[int, Fact] = {fact.pk: fact}
    frontier = {fact.pk}
    while frontier:
        found = Fact.objects.filter(Q(superseded_by__in=frontier) | Q(supersedes__in=frontier)).exclude(
            pk__in=list(known)
        )
        frontier = set()
        for row in found.distinct():
            known[row.pk] = row
            frontier.add(row.pk)
    return [known[pk] for pk in sorted(known)]


def facts_query(room: Room, scopes: list[str], vector: list[float], k: int) -> list[tuple[Fact, float]]:
    """The room's active facts in `scopes` nearest to `vector` by meaning, best first, each with
    its cosine similarity: recall's candidates. The scope filter applies inside the query, and each
    is checked against its row (still active, still in scope)."""
    generation = reading_generation(room.host)
    if generation is None or not scopes:
        return []
    try:
        found = index.query_facts(generation, vector, room_id=room.pk, scopes=scopes, n=k)
    except Exception as exc:  # noqa: BLE001 - the vector store is unreachable
        raise SearchUnavailable(
            f"The memory index could not be searched: {exc or type(exc).__name__}"
        ) from exc
    rows = Fact.objects.filter(
        room=room, scope__in=scopes, status=Fact.Status.ACTIVE, pk__in=[pk for pk, _ in found]
    ).in_bulk()
    return [(rows[pk], score) for pk, score in found if pk in rows]


def fact_stats(room: Room, viewer=None) -> dict:
    """Counts of a room's facts: in all, by status, by category (every status), pinned. With
    `viewer`, of only the facts they may read (`facts_for`)."""
    rows = Fact.objects.filter(room=room) if viewer is None else facts_for(room, viewer, status=None)
    by_status = dict(rows.values_list("status").annotate(n=Count("pk")).order_by("status"))
    by_category = dict(rows.values_list("category").annotate(n=Count("pk")).order_by("category"))
    return {
        "total": sum(by_status.values()),
        "by_status": {value: by_status.get(value, 0) for value in Fact.Status.values},
        "by_category": {value: by_category.get(value, 0) for value in Fact.Category.values},
        "pinned": rows.filter(pinned=True).count(),
    }


# The panel's and the API's facts ------------------------------------------------------------------

FACT_STATUSES = {
    "active": "Active",
    "superseded": "Corrected",
    "forgotten": "Forgotten",
    "all": "Any status",
}
FACT_HEATS = {"all": "Hot and cold", "hot": "Hot", "cold": "Cold"}


def fact_list(
    room: Room,
    viewer,
    *,
    category: str | None = None,
    status: str = "active",
    heat: str = "all",
    scope: str | None = None,
    q: str = "",
):
    """The facts of a room `viewer` may read, filtered as the panel and the API do: by category,
    status ("all" for every one), heat ("hot", "cold", "all"), scope and words of the text;
    pinned first, then hottest, then newest."""
    rows = facts_for(
        room,
        viewer,
        category=category,
        status=None if status == "all" else status,
        heat_min=HOT if heat == "hot" else None,
        heat_max=math.nextafter(HOT, 0.0) if heat == "cold" else None,
    )
    if scope:
        rows = rows.filter(scope=scope)
    for word in q.split()[:8]:
        rows = rows.filter(text__icontains=word)
    return rows.annotate(corrections=Count("supersedes"))


def fact_room_id(fact_id: int) -> int | None:
    """The room a fact belongs to (permissions are checked on the room), or None."""
    return Fact.objects.filter(pk=fact_id).values_list("room_id", flat=True).first()


def fact_get(room: Room, viewer, fact_id: int) -> Fact | None:
    """One fact of the room, if `viewer` may read it."""
    return facts_for(room, viewer, status=None).filter(pk=fact_id).first()


def fact_chains(facts) -> dict[int, list[Fact]]:
    """The correction chain (`fact_history`) of each of these facts that has one: fact pk ->
    every version, oldest first. Facts never corrected are left out."""
    chains: dict[int, list[Fact]] = {}
    for fact in facts:
        if fact.pk in chains:
            continue
        if fact.superseded_by_id is None and not getattr(fact, "corrections", 1):
            continue
        history = fact_history(fact)
        if len(history) > 1:
            for version in history:
                chains[version.pk] = history
    return {fact.pk: chains[fact.pk] for fact in facts if fact.pk in chains}


def fact_messages(room: Room, fact: Fact, *, limit: int = 200) -> list[dict]:
    """The messages a fact came from (what the room holds of them now), oldest first."""
    return _messages_between(room, fact.first_seq, fact.last_seq, limit=limit)


def fact_scopes(room: Room, viewer) -> list[str]:
    """The scopes of the room's facts `viewer` may read: the shared set, and for the host each
    character's own."""
    if permissions.standing(viewer, room) != permissions.HOST:
        return [SHARED]
    return [SHARED, *(seat_scope(pk) for pk in room.seats.values_list("pk", flat=True))]


def fact_scope_names(room: Room) -> list[tuple[str, str]]:
    """Each scope a host may give a fact, with its name: the shared set, then each character's own."""
    return [
        (SHARED, "Shared"),
        *((seat_scope(pk), f"{name}'s own") for pk, name in room.seats.values_list("pk", "name")),
    ]


def fact_search(room: Room, viewer, *, q: str, limit: int = 10, min_score: float = 0.0):
    """The active facts of the room `viewer` may read nearest to `q` by meaning, best first,
    each with its cosine similarity."""
    generation = reading_generation(room.host)
    if generation is None:
        return []
    try:
        vector = embedding.embed_with(generation.model_key, [q])[0]
    except embedding.EmbedderFailed as exc:
        raise SearchUnavailable(f"The memory index could not be searched: {exc}") from exc
    found = facts_query(room, fact_scopes(room, viewer), vector, limit)
    return [(fact, score) for fact, score in found if score >= min_score]


def scene_note_get(room: Room) -> tuple[SceneNote, str] | None:
    """The room's current scene note and who wrote it last ("reader", "model", "person"); None if none."""
    row = RoomMemory.objects.filter(room=room).values_list("scene_note", "scene_note_source").first()
    if not row or not row[0]:
        return None
    data = row[0]
    note = SceneNote(
        where=data.get("where", ""),
        who=tuple(data.get("who", ())),
        when=data.get("when", ""),
        open_threads=tuple(data.get("open_threads", ())),
    )
    return note, row[1]


def scene_note_text(room: Room) -> str:
    """The scene note as prompt text ("" when there is none, or it says nothing)."""
    found = scene_note_get(room)
    return render_scene_note(found[0]) if found else ""
