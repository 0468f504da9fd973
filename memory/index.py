"""The vector index: summaries in `memories`, transcript chunks in `scenes`, on the Chroma server.

Each host's vectors live in one *generation* (`VectorIndex`) per embedding model; ids are
deterministic, so indexing again replaces and never duplicates. Every vector carries room, host,
scope, tier, block and its `seq` range, so filters apply inside the query, before ranking.
"""

from __future__ import annotations

import hashlib

from django.db import transaction

from memory import vectorstore
from memory.models import Scene, Summary, VectorIndex
from orbchat.connections import embedder, gateway
from orbchat.connections.services import model_roles_get

BATCH = 64
BUILTIN_KEY = "builtin:all-MiniLM-L6-v2"


class EmbedderFailed(Exception):
    """The Text-embedding model could not embed (the message says why, in plain words)."""


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def model_key(user) -> str:
    roles = model_roles_get(user=user)
    if roles.embedding is None:
        return BUILTIN_KEY
    return f"{roles.embedding.pk}:{roles.embedding.model}"


def embed(user, texts: list[str]) -> list[list[float]]:
    """Embed texts with the user's Text-embedding role (the built-in MiniLM by default), in batches."""
    return _embed(model_roles_get(user=user).embedding, texts)


def embed_for(generation: VectorIndex, texts: list[str]) -> list[list[float]]:
    """Embed texts with the model of a generation (an older one keeps its own model until retired)."""
    if generation.model_key == BUILTIN_KEY:
        return _embed(None, texts)
    from orbchat.connections.models import Connection

    connection = Connection.objects.filter(pk=int(generation.model_key.split(":", 1)[0])).first()
    if connection is None:
        raise EmbedderFailed("the embedding connection of this index was deleted")
    return _embed(connection, texts)


def _embed(connection, texts: list[str]) -> list[list[float]]:
    vectors: list[list[float]] = []
    try:
        for start in range(0, len(texts), BATCH):
            batch = texts[start : start + BATCH]
            if connection is None:
                vectors.extend(embedder.embed(batch))
            else:
                vectors.extend(gateway.embed(gateway.target_for(connection), batch))
    except Exception as exc:  # noqa: BLE001 - any embedder failure is reported, never a crash
        raise EmbedderFailed(gateway.plain_error(exc)) from exc
    return vectors


def live_generations(user) -> list[VectorIndex]:
    """Return the generations writes go to: the current model's, and a still-ready older one.

    The first use makes a ready generation; a changed embedding model makes a building one
    (the re-index task fills it, then it replaces the old).
    """
    key = model_key(user)
    with transaction.atomic():
        live = list(
            VectorIndex.objects.select_for_update().filter(user=user).exclude(state=VectorIndex.State.RETIRED)
        )
        if not any(g.model_key == key for g in live):
            state = VectorIndex.State.BUILDING if live else VectorIndex.State.READY
            generation = VectorIndex.objects.create(user=user, model_key=key, state=state)
            live.insert(0, generation)
            if state == VectorIndex.State.BUILDING:
                transaction.on_commit(lambda: _start_reindex(generation.pk))
    return live


def _start_reindex(generation_id: int) -> None:
    from memory import tasks

    tasks.reindex.delay(generation_id)


def has_vectors(user) -> bool:
    """Whether the user has an index at all (a first one is made on first use, not here)."""
    return VectorIndex.objects.filter(user=user).exists()


def reading_generation(user) -> VectorIndex | None:
    """The generation recall and search read: the newest ready one."""
    return (
        VectorIndex.objects.filter(user=user, state=VectorIndex.State.READY)
        .order_by("-created_at", "-pk")
        .first()
    )


def _collection(generation: VectorIndex, kind: str):
    return vectorstore.client().get_or_create_collection(
        generation.collection(kind), configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )


def memory_id(summary: Summary) -> str:
    return f"m:{summary.room_id}:{summary.scope}:{summary.tier}:{summary.block}"


def scene_id(room_id: int, block: int) -> str:
    return f"s:{room_id}:{block}"


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


def memory_vectors(generation: VectorIndex, ids: list[str]) -> dict[str, list[float]]:
    """Return the stored vectors of these summaries (ids missing from the index are left out)."""
    got = _collection(generation, "memories").get(ids=ids, include=["embeddings"])
    return dict(zip(got["ids"], got["embeddings"], strict=True))


def delete_memories(generations: list[VectorIndex], ids: list[str]) -> None:
    if ids:
        for generation in generations:
            _collection(generation, "memories").delete(ids=ids)


def delete_scenes(generations: list[VectorIndex], ids: list[str]) -> None:
    if ids:
        for generation in generations:
            _collection(generation, "scenes").delete(ids=ids)


def drop_generation(generation: VectorIndex) -> None:
    """Delete a retired generation's collections from the server."""
    client = vectorstore.client()
    for kind in ("memories", "scenes"):
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


def embed_query(generation: VectorIndex, text: str) -> list[float]:
    """Embed one short query with the generation's model.

    The built-in model embeds it on one thread: a dozen tokens gain nothing from a second one, and
    while the other core is busy the threads' hand-offs cost many times the work (measured in
    docs/benchmarks.md, "Search latency choices"). The thread count is restored afterwards.
    """
    if generation.model_key != BUILTIN_KEY:
        return embed_for(generation, [text])[0]
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _embed(None, [text])[0]
    finally:
        torch.set_num_threads(previous)
