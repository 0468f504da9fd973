"""Writes a person makes to a room's memory: edit, forget, add, pin, generate the next one now,
rebuild a stretch.

A person's word wins: an edited or added memory is "Yours" and never rewritten automatically; a
forgotten one stays forgotten (its stretch uncovered) until the person asks for a rebuild. Every
change re-embeds at once (outside the transaction), and roll-ups made from a changed summary are
marked stale so the worker rewrites them with the correction.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Max, Q

from memory import blocks, index, jobs
from memory.drafts import read
from memory.extractive import proper_names
from memory.models import MAX_MEMORY_TEXT, SHARED, RoomMemory, Summary
from memory.selectors import block_tuning, forgotten_blocks, memory_on, message_seqs, tuning_get
from memory.services.indexing import generations_ensure, upsert_memories_into
from memory.services.summaries import ProviderTrouble, keywords_index, unforget, write_summary
from orbchat.connections import embedding
from orbchat.connections.selectors import model_roles_get
from rooms.models import Message, Room

log = logging.getLogger(__name__)

REEMBED_FAILED = "Saved, but it could not be indexed yet ({reason}); it is indexed on the next memory run."


class MemoryRefused(ValueError):
    """A person's memory change was refused; `field` names the input at fault (or "")."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def clean_text(text: str | None, *, field: str = "text") -> str:
    """Return the memory text stripped, or refuse an empty or over-long one."""
    text = (text or "").strip()
    if not text:
        raise MemoryRefused("A memory needs some text.", field=field)
    if "\x00" in text:
        raise MemoryRefused("A memory cannot hold NUL characters.", field=field)
    if len(text) > MAX_MEMORY_TEXT:
        raise MemoryRefused(
            f"A memory holds at most {MAX_MEMORY_TEXT:,} characters; this one has {len(text):,}.", field=field
        )
    return text


def clean_range(room: Room, seq_from: int | None, seq_to: int | None) -> tuple[int | None, int | None]:
    """Return a valid message range of the room (both None: tied to no messages), or refuse."""
    if seq_from is None and seq_to is None:
        return None, None
    if seq_from is None or seq_to is None:
        raise MemoryRefused("Give both the first and the last message, or neither.", field="seq_from")
    if seq_from < 0 or seq_to < seq_from:
        raise MemoryRefused(
            "The first message must be 0 or more and not after the last one.", field="seq_from"
        )
    newest = Message.objects.filter(room=room).aggregate(n=Max("seq"))["n"]
    if newest is None or seq_to > newest:
        raise MemoryRefused(
            f"This chat's messages go up to #{newest if newest is not None else 0}.", field="seq_to"
        )
    return seq_from, seq_to


def _parts(text: str) -> dict:
    draft = read(text)
    keywords = draft.keywords or proper_names(". ".join([draft.heading, *draft.facts]))
    return {"heading": draft.heading[:300], "facts": draft.facts, "keywords": keywords}


def _mark_rollups_stale(summary: Summary) -> None:
    """The roll-ups above a tier summary were made from its old text: rewrite them (not a person's)."""
    if summary.added:
        return
    t = block_tuning(tuning_get())
    above = Q()
    for tier, block in blocks.ancestors(summary.tier, summary.block, t):
        above |= Q(tier=tier, block=block)
    if above:
        Summary.objects.filter(above, room_id=summary.room_id, scope=summary.scope).exclude(
            source=Summary.Source.PERSON
        ).update(stale=True)
        jobs.enqueue_catch_up(summary.room_id)


def reembed(summary: Summary) -> str:
    """Index a summary's current text in every live generation now; return a notice if that failed."""
    try:
        for position, generation in enumerate(generations_ensure(summary.room.host)):
            upsert_memories_into(generation, [summary], required=position == 0)
    except embedding.EmbedderFailed as exc:
        return REEMBED_FAILED.format(reason=exc.args[0] if exc.args else "the embedder failed")
    except Exception as exc:  # noqa: BLE001 - the vector store is down: the next run indexes it
        log.exception("re-embedding summary %s failed", summary.pk)
        return REEMBED_FAILED.format(reason=str(exc) or exc.__class__.__name__)
    digest = index.text_hash(summary.text)
    Summary.objects.filter(pk=summary.pk, text=summary.text).update(text_hash=digest, indexed_hash=digest)
    return ""


def _locked(room: Room, summary_id: int) -> Summary:
    summary = Summary.objects.select_for_update().filter(pk=summary_id, room=room).first()
    if summary is None:
        raise MemoryRefused("That memory no longer exists.", field="id")
    return summary


def memory_edit(*, room: Room, summary_id: int, text: str) -> tuple[Summary, str]:
    """Replace a memory's text with a person's; it becomes "Yours". Return it and a notice ("" if none)."""
    text = clean_text(text)
    with transaction.atomic():
        summary = _locked(room, summary_id)
        for name, value in _parts(text).items():
            setattr(summary, name, value)
        summary.text = text
        summary.text_hash = index.text_hash(text)
        summary.source = Summary.Source.PERSON
        summary.model = ""
        summary.stale = False
        summary.save()
        keywords_index(summary=summary)
        _mark_rollups_stale(summary)
    return summary, reembed(summary)


def memory_pin(*, room: Room, summary_id: int, pinned: bool) -> Summary:
    """Pin a memory (sent with every reply, within the memory budget) or unpin it."""
    with transaction.atomic():
        summary = _locked(room, summary_id)
        summary.pinned = pinned
        summary.save(update_fields=["pinned", "updated_at"])
    return summary


def memory_forget(*, room: Room, summary_id: int) -> Summary:
    """Delete a memory. A tier summary's stretch stays uncovered (never rewritten on its own)
    until a rebuild; the roll-ups made from it are rewritten without it. Return the deleted row."""
    with transaction.atomic():
        summary = _locked(room, summary_id)
        if not summary.added:
            state, _ = RoomMemory.objects.select_for_update().get_or_create(room=room)
            mark = [summary.scope, summary.tier, summary.block]
            if mark not in state.forgotten:
                state.forgotten = [*state.forgotten, mark]
                state.save(update_fields=["forgotten", "updated_at"])
            _mark_rollups_stale(summary)
        vector_id = index.memory_id(summary)
        summary.delete()
        jobs.enqueue_forget_vectors(room.host_id, [vector_id], [])
    return summary


def memory_add(
    *,
    room: Room,
    text: str,
    seq_from: int | None = None,
    seq_to: int | None = None,
    pinned: bool = False,
) -> tuple[Summary, str]:
    """Add a person's own memory to the room's shared set, optionally tied to a message range."""
    text = clean_text(text)
    seq_from, seq_to = clean_range(room, seq_from, seq_to)
    when = {}
    if seq_from is not None:
        stamps = dict(
            Message.objects.filter(room=room, seq__in=[seq_from, seq_to]).values_list("seq", "created_at")
        )
        when = {"first_at": stamps.get(seq_from), "last_at": stamps.get(seq_to)}
    with transaction.atomic():
        Room.objects.select_for_update().filter(pk=room.pk).first()  # one numbering at a time
        last = Summary.objects.filter(room=room, scope=SHARED, tier=Summary.ADDED).aggregate(n=Max("block"))[
            "n"
        ]
        summary = Summary.objects.create(
            room=room,
            scope=SHARED,
            tier=Summary.ADDED,
            block=0 if last is None else last + 1,
            seq_from=seq_from,
            seq_to=seq_to,
            text=text,
            text_hash=index.text_hash(text),
            source=Summary.Source.PERSON,
            pinned=pinned,
            **_parts(text),
            **when,
        )
        keywords_index(summary=summary)
    return summary, reembed(summary)


def memory_generate_next(*, room: Room) -> Summary | None:
    """Summarise the oldest stretch with no memory yet, without waiting for its block to fill
    (forgotten stretches are left to Rebuild). Return the new summary, or None: nothing left.

    A stretch cut short is rewritten whole once its block is complete. Raises MemoryRefused when
    memory is off or the Utility model failed (nothing is saved then).
    """
    tuning = tuning_get()
    if not memory_on(room, tuning):
        raise MemoryRefused("Memory is off for this chat: turn on “Remember earlier in long chats” first.")
    t = block_tuning(tuning)
    existing, visible = message_seqs(room)
    stretch = blocks.next_partial(
        existing_seqs=existing,
        visible_seqs=visible,
        covered=covered_blocks(room, existing, visible, t),
        t=t,
    )
    if stretch is None:
        return None
    start, end = stretch
    try:
        summary = write_summary(
            room=room,
            scope=SHARED,
            tier=0,
            block=blocks.block_of(start, 0, t),
            t=t,
            pov=None,
            utility=model_roles_get(user=room.host).utility,
            upto=end,
        )
    except ProviderTrouble as exc:
        raise MemoryRefused(f"The Utility model failed. {exc} Nothing was written.") from exc
    if summary is not None:
        reembed(summary)
        jobs.enqueue_catch_up(room.pk)  # roll-ups that can now be written
    return summary


def covered_blocks(room: Room, existing: list[int], visible: list[int], t: blocks.Tuning) -> set[int]:
    """Tier-0 blocks of the shared set whose every visible message (below the newest) has a
    memory, or that a person forgot. A memory cut short before its block filled covers only
    what it reached: the rest of that block is still to summarise. `existing` and `visible`
    are message numbers, ascending (`selectors.message_seqs`)."""
    newest = existing[-1] if existing else -1
    last_visible: dict[int, int] = {}
    for seq in visible:
        if seq < newest:
            last_visible[blocks.block_of(seq, 0, t)] = seq
    reached = dict(Summary.objects.filter(room=room, scope=SHARED, tier=0).values_list("block", "seq_to"))
    covered = {block for block, seq_to in reached.items() if seq_to >= last_visible.get(block, -1)}
    return covered | {block for scope, tier, block in forgotten_blocks(room) if scope == SHARED and tier == 0}


def memory_rebuild(*, room: Room, seq_from: int, seq_to: int | None = None) -> int:
    """Rewrite the memory of a stretch (to the end when `seq_to` is None): forgotten summaries come
    back, the model's summaries are rewritten; a person's stay as they are. Return how many
    summaries will be written again. The worker does the writing."""
    tuning = tuning_get()
    if not memory_on(room, tuning):
        raise MemoryRefused("Memory is off for this chat: turn on “Remember earlier in long chats” first.")
    if seq_from < 0 or (seq_to is not None and seq_to < seq_from):
        raise MemoryRefused("The stretch to rebuild must start at 0 or later and end after it starts.")
    t = block_tuning(tuning)
    last = seq_to if seq_to is not None else 2**31

    def inside(tier: int, block: int) -> bool:
        start, end = blocks.block_range(tier, block, t)
        return start <= last and end > seq_from

    with transaction.atomic():
        back = unforget(room.pk, inside)
        overlapping = Q(seq_to__gte=seq_from) & Q(seq_from__lte=last)
        marked = (
            Summary.objects.filter(overlapping, room=room)
            .exclude(tier=Summary.ADDED)
            .exclude(source=Summary.Source.PERSON)
            .update(stale=True)
        )
        jobs.enqueue_catch_up(room.pk)
    return back + marked
