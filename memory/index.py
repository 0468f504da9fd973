"""The vector index: summaries in `memories`, transcript chunks in `scenes`, the passages of
single messages (runs of sentences) in `turns` (what quotes are found by) and active facts in
`facts`, on the Chroma server.

Each host's vectors live in one *generation* (`VectorIndex`) per embedding model; ids are
deterministic, so indexing again replaces and never duplicates. Every vector carries room, host,
scope, tier, block and its `seq` range, so filters apply inside the query, before ranking.

Only Chroma lives here (collections, upserts, queries). The generations are rows, read in
`memory.selectors` and made in `memory.services.indexing`; which model embeds is decided in
`orbchat.connections.embedding`.
"""

from __future__ import annotations

import hashlib

from memory import vectorstore
from memory.drafts import Line
from memory.models import Fact, Scene, Summary, VectorIndex

BATCH = 64
PASSAGES_PER_MESSAGE = 4  # a query for n messages asks for this many passages each


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _collection(generation: VectorIndex, kind: str):
    return vectorstore.client().get_or_create_collection(
        generation.collection(kind), configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )


def memory_id(summary: Summary) -> str:
    return f"m:{summary.room_id}:{summary.scope}:{summary.tier}:{summary.block}"


def scene_id(room_id: int, block: int) -> str:
    return f"s:{room_id}:{block}"


def turn_id(room_id: int, seq: int, passage: int) -> str:
    return f"t:{room_id}:{seq}:{passage}"


def fact_id(fact_pk: int) -> str:
    return f"f:{fact_pk}"


def fact_pk(vector_id: str) -> int:
    return int(vector_id.split(":", 1)[1])


def _stamp(value) -> int:
    return int(value.timestamp()) if value else 0


def memory_metadata(summary: Summary, host_id: int) -> dict:
    return {
        "room": summary.room_id,
        "host": host_id,
        "scope": summary.scope,
        "tier": summary.tier,
        "block": summary.block,
        "seq_from": summary.seq_from,
        "seq_to": summary.seq_to,
        "at": _stamp(summary.first_at),
    }


def upsert_memories(generation: VectorIndex, summaries: list[Summary], vectors: list[list[float]]) -> None:
    if not summaries:
        return
    host_id = generation.user_id
    _collection(generation, "memories").upsert(
        ids=[memory_id(s) for s in summaries],
        embeddings=vectors,
        metadatas=[memory_metadata(s, host_id) for s in summaries],
        documents=[s.text for s in summaries],
    )


def fact_metadata(fact: Fact, host_id: int) -> dict:
    meta = {
        "room": fact.room_id,
        "host": host_id,
        "scope": fact.scope,
        "status": fact.status,
        "category": fact.category,
    }
    if fact.first_seq is not None:  # a fact tied to no messages carries no range
        meta.update(seq_from=fact.first_seq, seq_to=fact.last_seq)
    return meta


def upsert_facts(generation: VectorIndex, facts: list[Fact], vectors: list[list[float]]) -> None:
    if not facts:
        return
    host_id = generation.user_id
    _collection(generation, "facts").upsert(
        ids=[fact_id(f.pk) for f in facts],
        embeddings=vectors,
        metadatas=[fact_metadata(f, host_id) for f in facts],
        documents=[f.text for f in facts],
    )


def delete_facts(generations: list[VectorIndex], ids: list[str]) -> None:
    if ids:
        for generation in generations:
            _collection(generation, "facts").delete(ids=ids)


def query_facts(
    generation: VectorIndex, vector: list[float], *, room_id: int, scopes: list[str], n: int
) -> list[tuple[int, float]]:
    """Return (fact pk, cosine) of the room's active facts in `scopes` nearest to `vector`, best first."""
    where = {"$and": [{"room": room_id}, {"scope": {"$in": list(scopes)}}, {"status": Fact.Status.ACTIVE}]}
    got = _collection(generation, "facts").query(
        query_embeddings=[vector], n_results=max(1, n), where=where, include=["distances"]
    )
    return [(fact_pk(id_), 1.0 - float(d)) for id_, d in zip(got["ids"][0], got["distances"][0], strict=True)]


def upsert_scenes(
    generation: VectorIndex,
    scenes: list[Scene],
    texts: list[str],
    speakers: list[str],
    vectors: list[list[float]],
) -> None:
    if not scenes:
        return
    _collection(generation, "scenes").upsert(
        ids=[scene_id(s.room_id, s.block) for s in scenes],
        embeddings=vectors,
        metadatas=[
            {
                "room": s.room_id,
                "host": generation.user_id,
                "block": s.block,
                "seq_from": s.seq_from,
                "seq_to": s.seq_to,
                "at": _stamp(s.first_at),
                "speakers": speaker,
            }
            for s, speaker in zip(scenes, speakers, strict=True)
        ],
        documents=texts,
    )


def passage_key(text: str) -> str:
    """A passage's identity for telling repeats apart: its words, casefolded, hashed."""
    return hashlib.sha256(" ".join(text.casefold().split()).encode()).hexdigest()[:16]


def unseen_turns(
    generation: VectorIndex, entries: list[tuple[int, int, Line, int]], texts: list[str]
) -> tuple[list[tuple[int, int, Line, int]], list[str]]:
    """Keep the passages the room's `turns` do not hold word for word yet (the first of repeats
    among these): a refrain said a hundred times ("*nods*", "the kettle sings") is one vector, not a
    hundred identical ones, which would also crowd the index's graph so that its search misses."""
    keys = [passage_key(text) for text in texts]
    held: set[tuple[int, str]] = set()
    for room_id in {entry[0] for entry in entries}:
        wanted = sorted({key for entry, key in zip(entries, keys, strict=True) if entry[0] == room_id})
        for start in range(0, len(wanted), 500):
            got = _collection(generation, "turns").get(
                where={"$and": [{"room": room_id}, {"key": {"$in": wanted[start : start + 500]}}]},
                include=["metadatas"],
            )
            held.update((room_id, meta["key"]) for meta in got["metadatas"])
    kept_entries, kept_texts = [], []
    for entry, text, key in zip(entries, texts, keys, strict=True):
        if (entry[0], key) in held:
            continue
        held.add((entry[0], key))
        kept_entries.append(entry)
        kept_texts.append(text)
    return kept_entries, kept_texts


def upsert_turns(
    generation: VectorIndex,
    entries: list[tuple[int, int, Line, int]],
    texts: list[str],
    vectors: list[list[float]],
) -> None:
    """Store the passages of single messages (room id, block, line, passage number), their texts
    giving each its repeat key, with their vectors (`quotes.passages` cuts them)."""
    if not entries:
        return
    _collection(generation, "turns").upsert(
        ids=[turn_id(room_id, line.seq, passage) for room_id, _, line, passage in entries],
        embeddings=vectors,
        metadatas=[
            {
                "room": room_id,
                "host": generation.user_id,
                "block": block,
                "seq": line.seq,
                "at": _stamp(line.when),
                "key": passage_key(text),
            }
            for (room_id, block, line, _), text in zip(entries, texts, strict=True)
        ],
    )


def query_turns(
    generation: VectorIndex, vector: list[float], *, room_id: int, before: int, n: int
) -> dict[int, float]:
    """Return the cosine of the room's messages before `before` nearest to `vector`, a message's
    best passage standing for it (seq -> cosine), for up to `n` messages."""
    where = {"$and": [{"room": room_id}, {"seq": {"$lt": before}}]}
    got = _collection(generation, "turns").query(
        query_embeddings=[vector],
        n_results=max(1, n * PASSAGES_PER_MESSAGE),
        where=where,
        include=["distances", "metadatas"],
    )
    best: dict[int, float] = {}
    for meta, distance in zip(got["metadatas"][0], got["distances"][0], strict=True):
        seq = int(meta["seq"])
        best[seq] = max(best.get(seq, -1.0), 1.0 - float(distance))
    return dict(sorted(best.items(), key=lambda item: -item[1])[: max(1, n)])


def stored_ids(generation: VectorIndex, kind: str, ids: list[str]) -> set[str]:
    """Return which of these `kind` ids the generation already holds."""
    return set(_collection(generation, kind).get(ids=ids, include=[])["ids"])


def memory_vectors(generation: VectorIndex, ids: list[str]) -> dict[str, list[float]]:
    """Return the stored vectors of these summaries (ids missing from the index are left out)."""
    got = _collection(generation, "memories").get(ids=ids, include=["embeddings"])
    return dict(zip(got["ids"], got["embeddings"], strict=True))


def delete_memories(generations: list[VectorIndex], ids: list[str]) -> None:
    if ids:
        for generation in generations:
            _collection(generation, "memories").delete(ids=ids)


def delete_scenes(generations: list[VectorIndex], ids: list[str]) -> None:
    """Delete scene chunks, and the single messages of their blocks with them."""
    if ids:
        for generation in generations:
            _collection(generation, "scenes").delete(ids=ids)
        by_room: dict[int, list[int]] = {}
        for scene in ids:
            _, room_id, block = scene.split(":")
            by_room.setdefault(int(room_id), []).append(int(block))
        for room_id, numbers in by_room.items():
            delete_turns(generations, room_id, numbers)


def delete_turns(generations: list[VectorIndex], room_id: int, numbers: list[int]) -> None:
    """Delete the single messages of these blocks of a room."""
    if numbers:
        for generation in generations:
            _collection(generation, "turns").delete(
                where={"$and": [{"room": room_id}, {"block": {"$in": list(numbers)}}]}
            )


def drop_generation(generation: VectorIndex) -> None:
    """Delete a retired generation's collections from the server."""
    client = vectorstore.client()
    for kind in ("memories", "scenes", "turns", "facts"):
        try:
            client.delete_collection(generation.collection(kind))
        except Exception:  # noqa: BLE001, S110 - already gone is fine
            pass


# Reads for the Corpus (search over a host's whole index) ---------------------------------------------


def query_index(
    generation: VectorIndex, kind: str, vector: list[float], *, where: dict, n: int
) -> list[tuple[str, float]]:
    """Return (id, cosine similarity) of the `kind` vectors nearest to `vector`, best first.

    `where` is a Chroma metadata filter; it applies inside the query, before ranking."""
    got = _collection(generation, kind).query(
        query_embeddings=[vector], n_results=max(1, n), where=where, include=["distances"]
    )
    return [(id_, 1.0 - float(d)) for id_, d in zip(got["ids"][0], got["distances"][0], strict=True)]


def index_documents(
    generation: VectorIndex, kind: str, *, where: dict, page: int = 5000
) -> tuple[list[str], list[str], list[dict]]:
    """Return the ids, documents and metadata of every `kind` vector matching `where`, in pages."""
    store = _collection(generation, kind)
    ids: list[str] = []
    documents: list[str] = []
    metadatas: list[dict] = []
    while True:
        got = store.get(where=where, limit=page, offset=len(ids), include=["documents", "metadatas"])
        ids.extend(got["ids"])
        documents.extend(got["documents"] or [])
        metadatas.extend(got["metadatas"] or [])
        if len(got["ids"]) < page:
            return ids, documents, metadatas


def index_vectors(generation: VectorIndex, kind: str, ids: list[str]) -> dict[str, list[float]]:
    """Return the stored vectors of these `kind` ids (ids missing from the index are left out)."""
    if not ids:
        return {}
    got = _collection(generation, kind).get(ids=ids, include=["embeddings"])
    return dict(zip(got["ids"], got["embeddings"], strict=True))


def index_records(generation: VectorIndex, kind: str, ids: list[str]) -> dict[str, tuple[str, dict]]:
    """Return (document, metadata) of these `kind` ids (ids missing from the index are left out)."""
    if not ids:
        return {}
    got = _collection(generation, kind).get(ids=ids, include=["documents", "metadatas"])
    return {
        id_: (text or "", meta or {})
        for id_, text, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
    }
