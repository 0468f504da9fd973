"""Writes of the vector index: the generations, embedding what changed, re-indexing for a new model.

Embedding and Chroma calls happen outside database transactions; a summary's (or a fact's)
`indexed_hash` is written only when its text is still the one that was embedded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from memory import blocks, index, jobs
from memory.drafts import Line
from memory.models import Fact, Scene, Summary, VectorIndex
from memory.recall import quotes as quoting
from memory.selectors import live_generations, message_lines
from orbchat.accounts.models import User
from orbchat.connections import embedding
from rooms.models import Room


def generations_ensure(user) -> list[VectorIndex]:
    """Return the generations writes go to, making the current model's when it is missing.

    The first use makes a ready generation; a changed embedding model makes a building one
    (the re-index task fills it, then it replaces the old).
    """
    key = embedding.model_key(user)
    with transaction.atomic():
        live = list(
            VectorIndex.objects.select_for_update().filter(user=user).exclude(state=VectorIndex.State.RETIRED)
        )
        if not any(g.model_key == key for g in live):
            state = VectorIndex.State.BUILDING if live else VectorIndex.State.READY
            generation = VectorIndex.objects.create(user=user, model_key=key, state=state)
            live.insert(0, generation)
            if state == VectorIndex.State.BUILDING:
                jobs.enqueue_reindex(generation.pk)
    return live


def vectors_forget(
    *, host_id: int, memory_ids: list[str], scene_ids: list[str], fact_ids: list[str] | None = None
) -> None:
    """Delete vectors of summaries, scenes and facts that no longer exist from the host's index."""
    user = User.objects.filter(pk=host_id).first()
    if user is not None:
        generations = live_generations(user)
        index.delete_memories(generations, memory_ids)
        index.delete_scenes(generations, scene_ids)
        index.delete_facts(generations, list(fact_ids or ()))


@dataclass
class Indexed:
    """What one `index_room` embedded, and how long each part took."""

    memories: int = 0
    scenes: int = 0
    facts: int = 0
    memories_s: float = 0.0
    scenes_s: float = 0.0


def index_room(
    room: Room,
    *,
    fresh_start: int,
    t: blocks.Tuning,
    beat: Callable[[], None] | None = None,
) -> Indexed:
    """Embed what changed: summaries whose text is not indexed yet, and newly aged-out scenes."""
    done = Indexed()
    generations = generations_ensure(room.host)
    clock = time.perf_counter()
    count = 0
    # Each summary stores the hash of its text: the changed ones are found by the database.
    changed = list(
        Summary.objects.filter(room=room)
        .filter(Q(indexed_hash="") | ~Q(indexed_hash=F("text_hash")))
        .values_list("pk", flat=True)
    )
    for start in range(0, len(changed), index.BATCH):
        batch = list(Summary.objects.filter(pk__in=changed[start : start + index.BATCH]))
        for position, generation in enumerate(generations):
            upsert_memories_into(generation, batch, required=position == 0)
        for summary in batch:
            digest = index.text_hash(summary.text)
            Summary.objects.filter(pk=summary.pk, text=summary.text).update(
                text_hash=digest, indexed_hash=digest
            )
        count += len(batch)
        if beat:
            beat()
    done.memories = count
    done.memories_s = time.perf_counter() - clock
    clock = time.perf_counter()
    done.scenes = index_scenes(room, fresh_start=fresh_start, t=t, generations=generations, beat=beat)
    done.scenes_s = time.perf_counter() - clock
    done.facts = index_facts(room, generations=generations)
    return done


def _upsert_into(generation, batch: list, store, *, required: bool) -> None:
    """Embed the texts of `batch` with the generation's own model and `store` them with their
    vectors; an older generation whose model is gone is skipped unless `required`."""
    try:
        vectors = embedding.embed_with(generation.model_key, [item.text for item in batch])
    except embedding.EmbedderFailed:
        if required:
            raise
        return  # an older index whose model is gone: it retires once the new one is built
    store(generation, batch, vectors)


def upsert_memories_into(generation, batch: list[Summary], *, required: bool) -> None:
    """Embed and store summaries in one generation, with that generation's own model."""
    _upsert_into(generation, batch, index.upsert_memories, required=required)


def upsert_facts_into(generation, batch: list[Fact], *, required: bool) -> None:
    """Embed and store facts in one generation, with that generation's own model."""
    _upsert_into(generation, batch, index.upsert_facts, required=required)


def facts_indexed(facts: list[Fact]) -> None:
    """Record that these facts' texts are in the index (unless their text or status moved on)."""
    with transaction.atomic():  # one commit for the batch
        for fact in facts:
            digest = index.text_hash(fact.text)
            Fact.objects.filter(pk=fact.pk, text=fact.text, status=Fact.Status.ACTIVE).update(
                text_hash=digest, indexed_hash=digest
            )


def index_facts(room: Room, *, generations: list[VectorIndex]) -> int:
    """Embed the room's active facts whose text is not indexed yet (a write whose embedding
    failed, a new host); return how many."""
    changed = list(
        Fact.objects.filter(room=room, status=Fact.Status.ACTIVE)
        .filter(Q(indexed_hash="") | ~Q(indexed_hash=F("text_hash")))
        .values_list("pk", flat=True)
    )
    for start in range(0, len(changed), index.BATCH):
        batch = list(Fact.objects.filter(pk__in=changed[start : start + index.BATCH]))
        for position, generation in enumerate(generations):
            upsert_facts_into(generation, batch, required=position == 0)
        facts_indexed(batch)
    return len(changed)


def turn_passages(
    groups: list[tuple[int, int, list[Line]]],
) -> tuple[list[tuple[int, int, Line, int]], list[str]]:
    """The `turns` entries of scenes' messages (room id, block, line, passage number) and their
    texts: each message in its runs of sentences, as quotes are found by meaning."""
    entries: list[tuple[int, int, Line, int]] = []
    texts: list[str] = []
    for room_id, block, lines in groups:
        for line in lines:
            for number, text in enumerate(quoting.passages(line.text) or [line.text]):
                entries.append((room_id, block, line, number))
                texts.append(text)
    return entries, texts


def scene_text(lines: list[Line]) -> str:
    return "\n".join(f"#{line.seq} {line.speaker}: {line.text}" for line in lines)


def index_scenes(
    room: Room, *, fresh_start: int, t: blocks.Tuning, generations, beat: Callable[[], None] | None = None
) -> int:
    """Embed transcript chunks (one per tier-0 block) as they age out of the fresh window.

    A block whose chunk is indexed is not read again: a change to its messages clears the
    chunk's indexed hash (`messages_changed`, a new block size, a new host), so each run reads
    only new and changed blocks, not the whole chat.
    """
    last_block = fresh_start // t.block_size  # blocks before this one are complete
    scenes = Scene.objects.filter(room=room, block__lt=last_block)
    # Only the chunks whose indexed hash was cleared (or never set) are read as rows; a block with
    # no chunk yet (new, or holding no visible message last time) is found among the numbers.
    known = {s.block: s for s in scenes.filter(Q(indexed_hash="") | ~Q(indexed_hash=F("text_hash")))}
    indexed = set(scenes.values_list("block", flat=True)) - set(known)
    todo: list[tuple[Scene, str, str, list[Line]]] = []
    for block in range(last_block):
        if block in indexed:
            continue
        scene = known.get(block)
        start, end = blocks.block_range(0, block, t)
        lines = message_lines(room, start, end)
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
        todo.append((scene, text, speakers, lines))
    for start in range(0, len(todo), index.BATCH):
        batch = todo[start : start + index.BATCH]
        texts = [text for _, text, _, _ in batch]
        groups = [(scene.room_id, scene.block, group) for scene, _, _, group in batch]
        for generation in generations:
            # A block's messages are stored anew: one deleted or hidden since leaves with it.
            index.delete_turns([generation], batch[0][0].room_id, [scene.block for scene, *_ in batch])
            lines, passages = index.unseen_turns(generation, *turn_passages(groups))
            try:
                vectors = embedding.embed_with(generation.model_key, texts)
                turn_vectors = embedding.embed_with(generation.model_key, passages)
            except embedding.EmbedderFailed:
                if generation is not generations[0]:
                    continue  # an older index whose model is gone: it retires once the new one is built
                raise
            index.upsert_scenes(
                generation, [s for s, _, _, _ in batch], texts, [p for _, _, p, _ in batch], vectors
            )
            index.upsert_turns(generation, lines, passages, turn_vectors)
        Scene.objects.filter(pk__in=[s.pk for s, _, _, _ in batch]).update(indexed_hash=F("text_hash"))
        if beat:
            beat()
    return len(todo)


def reindex(generation_id: int, *, progress: Callable[[int, int], None] | None = None) -> bool:
    """Fill a building generation with every summary, scene and active fact of its host, then
    switch to it.

    Resumable: what the new collections already hold is skipped. Return True when it switched.
    """
    generation = VectorIndex.objects.select_related("user").filter(pk=generation_id).first()
    if generation is None or generation.state != VectorIndex.State.BUILDING:
        return False
    if generation.model_key != embedding.model_key(generation.user):
        return False  # the model changed again; that newer generation does the work
    user = generation.user
    summaries = list(Summary.objects.filter(room__host=user).order_by("pk"))
    scenes = list(Scene.objects.filter(room__host=user).select_related("room").order_by("pk"))
    facts = list(Fact.objects.filter(room__host=user, status=Fact.Status.ACTIVE).order_by("pk"))
    total = len(summaries) + len(scenes) + len(facts)
    VectorIndex.objects.filter(pk=generation.pk).update(total=total)
    done = 0
    for start in range(0, len(summaries), index.BATCH):
        batch = summaries[start : start + index.BATCH]
        have = index.stored_ids(generation, "memories", [index.memory_id(s) for s in batch])
        todo = [s for s in batch if index.memory_id(s) not in have]
        if todo:
            index.upsert_memories(
                generation, todo, embedding.embed_with(generation.model_key, [s.text for s in todo])
            )
        done += len(batch)
        VectorIndex.objects.filter(pk=generation.pk).update(done=done)
        if progress:
            progress(done, total)
    for start in range(0, len(scenes), index.BATCH):
        batch = scenes[start : start + index.BATCH]
        have = index.stored_ids(generation, "scenes", [index.scene_id(s.room_id, s.block) for s in batch])
        todo = [s for s in batch if index.scene_id(s.room_id, s.block) not in have]
        texts, speakers, groups = [], [], []
        for scene in todo:
            lines = message_lines(scene.room, scene.seq_from, scene.seq_to + 1)
            texts.append(scene_text(lines))
            speakers.append(", ".join(dict.fromkeys(line.speaker for line in lines)))
            groups.append((scene.room_id, scene.block, lines))
        if todo:
            index.upsert_scenes(
                generation, todo, texts, speakers, embedding.embed_with(generation.model_key, texts)
            )
            turns, passages = index.unseen_turns(generation, *turn_passages(groups))
            index.upsert_turns(
                generation, turns, passages, embedding.embed_with(generation.model_key, passages)
            )
        done += len(batch)
        VectorIndex.objects.filter(pk=generation.pk).update(done=done)
        if progress:
            progress(done, total)
    for start in range(0, len(facts), index.BATCH):
        batch = facts[start : start + index.BATCH]
        have = index.stored_ids(generation, "facts", [index.fact_id(f.pk) for f in batch])
        todo = [f for f in batch if index.fact_id(f.pk) not in have]
        if todo:
            index.upsert_facts(
                generation, todo, embedding.embed_with(generation.model_key, [f.text for f in todo])
            )
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
