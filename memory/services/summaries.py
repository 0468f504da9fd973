"""Writes of summaries: write one (tier 0 or a roll-up), forget some, and keep them true when the
messages under them change (stale, rewound, a new host).

The work follows Zulip's queue-worker shape: read what is needed, call the model *outside* any
transaction, then lock the row, check it is still what was expected, and only then write.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable

from django.db import transaction
from django.db.models import Q

from memory import blocks, chatstats, extractive, index, jobs, prompts, summarize
from memory.drafts import Draft, render
from memory.models import Fact, RoomMemory, Scene, Summary, SummaryKeyword
from memory.selectors import (
    block_tuning,
    live_generations,
    message_lines,
    room_vector_ids,
    tuning_get,
)
from orbchat.connections import gateway
from orbchat.library.textformats import text_format_for
from orbchat.prompting.instruct import Instruct
from rooms.models import Room

UTILITY_TIMEOUT = 60.0
# Provider answers worth trying again later (rate limits, overload, outages, timeouts).
RETRIABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}


# Receives the Utility model's streamed text, piece by piece ("" when a call opens).
OnText = Callable[[str], None]


def utility_call(
    target, messages: list[dict], *, tools: list[dict] | None = None, on_text: OnText | None = None, **params
) -> tuple[str, list[dict]]:
    """One Utility model call: its text and tool calls, asked whole, or streamed to `on_text`
    (an empty piece first, as the call opens) with the same result. Provider errors pass through."""
    if on_text is None:
        return gateway.complete_with_tools(target, messages, tools=tools, **params)
    on_text("")
    return gateway.stream_with_tools(target, messages, tools=tools, on_text=on_text, **params)


class ProviderTrouble(Exception):
    """The Utility model failed; `retriable` says whether trying later may help."""

    def __init__(self, message: str, *, retriable: bool) -> None:
        super().__init__(message)
        self.retriable = retriable


def _hash(payload: object) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _draft_of(summary: Summary) -> Draft:
    return Draft(heading=summary.heading, facts=list(summary.facts), keywords=list(summary.keywords))


def _utility_answer(
    target, messages: list[dict], *, template: Instruct | None = None, on_text: OnText | None = None
) -> str:
    """Ask the Utility model; a text-completion connection writes `messages` with `template`.

    With `on_text`, the answer is streamed and each piece is handed to it as it arrives (the
    host's cycle panel); the answer returned is the same whole text either way."""
    params = {"template": template, "timeout": UTILITY_TIMEOUT, "temperature": 0.2, "max_tokens": 600}
    try:
        return utility_call(target, messages, on_text=on_text, **params)[0]
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
    on_text: OnText | None = None,
) -> Summary | None:
    """Write (or rewrite) one summary; return it, or None when there was nothing to write.

    `utility` is the host's Utility connection, or None for the built-in extractive summariser.
    `upto` cuts a tier-0 block short (a person asked for it before the block filled): such a
    summary is written stale, so it is rewritten whole once the block is complete.
    `on_text` streams the model's answer to the caller as it is written.
    """
    start, end = blocks.block_range(tier, block, t)
    partial = tier == 0 and upto is not None and upto < end
    if partial:
        end = upto
    if tier == 0:
        lines = message_lines(room, start, end)
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
    prompt = ""
    if utility is not None:
        prompt = prompts.custom(tuning_get().custom_prompts, "block" if tier == 0 else "rollup")
    # The host's own prompt is part of the input; the built-in one leaves earlier hashes as they were.
    custom = [prompt] if prompt else []
    input_hash = _hash([source, utility.model if utility else "", pov, payload, *custom])

    existing = Summary.objects.filter(room=room, scope=scope, tier=tier, block=block).first()
    if existing and (
        existing.source == Summary.Source.PERSON
        or (existing.input_hash == input_hash and not existing.stale and not partial)
    ):
        return existing

    # The slow part, outside any transaction.
    if utility is not None:
        target = gateway.target_for(utility)
        text_format = text_format_for(utility)
        template = text_format.instruct if text_format is not None else None
        if tier == 0:
            messages = summarize.block_messages(lines, pov=pov, room_title=room.title, template=prompt)
            answer = _utility_answer(target, messages, template=template, on_text=on_text)
            draft = summarize.parse(answer, fallback=lines)
        else:
            messages = summarize.rollup_messages(
                [_draft_of(c) for c in children], tier=tier, pov=pov, room_title=room.title, template=prompt
            )
            answer = _utility_answer(target, messages, template=template, on_text=on_text)
            draft = summarize.parse(answer)
    elif tier == 0:
        draft = extractive.summarise(lines, pov=pov, stats=chatstats.chat_stats(room))
    else:
        draft = extractive.roll_up([_draft_of(c) for c in children], times=[first_at, last_at])

    with transaction.atomic():
        current = (
            Summary.objects.select_for_update().filter(room=room, scope=scope, tier=tier, block=block).first()
        )
        if current and current.source == Summary.Source.PERSON:
            return current  # a person wrote it while the model was working: theirs wins
        text = render(draft)
        values = {
            "seq_from": seq_from,
            "seq_to": seq_to,
            "heading": draft.heading,
            "facts": draft.facts,
            "keywords": draft.keywords,
            "text": text,
            "text_hash": index.text_hash(text),
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
    index.delete_memories(live_generations(room.host), ids)
    return len(doomed)


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
    jobs.enqueue_catch_up(room_id)


def messages_rewound(*, room_id: int, from_seq: int) -> None:
    """Everything from `from_seq` on was deleted: summaries and scenes reaching into it go at once.

    Those blocks no longer exist as they were; they are written again once they fill up anew.
    """
    doomed = list(Summary.objects.filter(room_id=room_id, seq_to__gte=from_seq).exclude(tier=Summary.ADDED))
    _clip_added(room_id, from_seq)
    unforget(room_id, lambda tier, block: blocks.block_range(tier, block, _t())[1] > from_seq)
    scenes = list(Scene.objects.filter(room_id=room_id, seq_to__gte=from_seq))
    host_id = Room.objects.filter(pk=room_id).values_list("host_id", flat=True).first()
    memory_ids = [index.memory_id(s) for s in doomed]
    scene_ids = [index.scene_id(room_id, s.block) for s in scenes]
    Summary.objects.filter(pk__in=[s.pk for s in doomed]).delete()
    Scene.objects.filter(pk__in=[s.pk for s in scenes]).delete()
    if memory_ids or scene_ids:
        jobs.enqueue_forget_vectors(host_id, memory_ids, scene_ids)
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


def unforget(room_id: int, which: Callable[[int, int], bool]) -> int:
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


def room_rehosted(*, room_id: int, old_host_id: int) -> None:
    """The room has a new host: move its memory into the new host's index.

    Vectors live in their host's collections, embedded with that host's model: the old host's
    copies go, and the worker embeds the room's memories, scenes and facts again for the new host
    (with the new host's model). Call inside the transaction that changed the host.
    """
    memory_ids, scene_ids = room_vector_ids(room_id)
    fact_ids = [index.fact_id(pk) for pk in Fact.objects.filter(room_id=room_id).values_list("pk", flat=True)]
    Summary.objects.filter(room_id=room_id).update(indexed_hash="")
    Scene.objects.filter(room_id=room_id).update(indexed_hash="")
    Fact.objects.filter(room_id=room_id).update(indexed_hash="")
    jobs.enqueue_forget_vectors(old_host_id, memory_ids, scene_ids, fact_ids)
    jobs.enqueue_catch_up(room_id)
