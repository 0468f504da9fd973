"""Search a host's chats, the shell: Scenes (transcript chunks) and Memories (summaries).

Scope is enforced before ranking, never by hiding results afterwards: the vector query runs in
the host's own collection, and its Chroma `where` holds the rooms the user hosts *now* (a room
handed to someone else keeps its old vectors in this index), narrowed by the room, character and
date filters; the word index is one per host and index generation, built from that host's
documents and masked by the same filter before it ranks. The two rankings are fused
(`corpus.ranking`).

The meaning side (embedding the query, the vector query) runs on a worker thread while this one
brings the word index up to date and ranks by words. The word index is kept in memory between
searches; one aggregate query per search tells whether the host's Scene or Summary rows changed,
and then only the texts embedded since are fetched.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from django import db
from django.db.models import Count, Max, Sum
from django.db.models.functions import Ord, Substr
from django.utils import timezone

from corpus import ranking
from corpus.ranking import MEMORIES, SCENES, TARGETS
from memory import index
from memory.models import Scene, Summary, VectorIndex
from memory.selectors import reading_generation
from orbchat.connections import embedding, gateway
from rooms.models import Room, Seat

log = logging.getLogger(__name__)

NOT_INDEXED = "Not indexed yet: your chats become searchable once memory has indexed them."
EMPTY_QUERY = "Type what you are looking for."
NO_ROOMS = "None of your chats match these filters."
NOTHING = "Nothing in these chats matches these filters."
# Shown beside the hits when `close` is False (the notice is kept for problems and empty lists).
NOT_CLOSE = "Nothing is really close to that; these are the nearest matches."
WORDS_ONLY = "Matched by words only: the embedding model failed ({reason})."
STORE_FAILED = "Search is unavailable right now: the vector index could not be read ({reason})."
UNKNOWN_TARGET = "Choose Scenes or Memories."
CORPORA = 8  # word indexes kept in memory (one per host, generation and target)
QUERIES = 256  # query vectors kept in memory (paging asks the same query again)
WORKERS = 4  # threads asking the embedder and the vector index while the word side runs
REFETCH = 500  # changed texts fetched one by one; more than this (or half) and the whole index is read
SNIPPET = 300


@dataclass
class Hit:
    """One result, with everything the Explore list shows and the transcript window needs."""

    target: str
    room_id: int
    room_title: str
    characters: list[str]
    block: int
    seq_from: int | None
    seq_to: int | None
    at: dt.datetime | None
    text: str  # as indexed (a scene's lines carry their "#<seq> " prefix)
    snippet: str  # the best window of the readable text
    score: float  # 0..1, shown as match %: closeness in meaning
    summary_id: int | None = None
    tier: int | None = None
    marks: list[tuple[str, bool]] = field(default_factory=list)  # the snippet, query words marked
    key: str = ""  # the index id


@dataclass
class Results:
    hits: list[Hit] = field(default_factory=list)
    close: bool = False  # the best match is really close (else the list says so)
    total: int = 0  # candidates ranked
    ms: float = 0.0
    notice: str = ""
    best_cosine: float | None = None  # the nearest candidate's cosine (what closeness weighs)
    timings: dict[str, float] = field(default_factory=dict)  # ms per stage (the benchmark reads them)


# The word index, per host ----------------------------------------------------------------------------------


@dataclass
class _Corpus:
    """A host's indexed documents of one target, with their word index."""

    version: tuple  # a cheap fingerprint of those rows (`_version`)
    rows: list[tuple]  # the database rows it was brought up to date with (each ends with indexed_hash)
    hashes: dict[str, str]  # index id -> indexed_hash of the text held here
    ids: list[str]
    texts: list[str]
    metadatas: list[dict]
    encoded: list[ranking.Encoded]
    vocabulary: ranking.Vocabulary
    rooms: np.ndarray
    at: np.ndarray
    positions: dict[str, int]
    words: ranking.LexicalIndex


_corpora: OrderedDict[tuple[int, str], _Corpus] = OrderedDict()
_queries: OrderedDict[tuple[int, str], np.ndarray] = OrderedDict()
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def forget_word_indexes() -> None:
    """Drop the in-memory word indexes and query vectors (tests; they rebuild on the next search)."""
    with _lock:
        _corpora.clear()
        _queries.clear()


def _query_vector(generation: VectorIndex, q: str) -> np.ndarray:
    key = (generation.pk, q)
    with _lock:
        found = _queries.get(key)
        if found is not None:
            _queries.move_to_end(key)
            return found
    vector = _unit(embedding.embed_query(generation.model_key, q))
    with _lock:
        _queries[key] = vector
        while len(_queries) > QUERIES:
            _queries.popitem(last=False)
    return vector


def _checksum():
    """A weighted sum over the first characters of each row's `indexed_hash` (it changes whenever
    a text is embedded again)."""
    total = Ord(Substr("indexed_hash", 1, 1))
    for position in range(2, 5):
        total = total + Ord(Substr("indexed_hash", position, 1)) * 131 ** (position - 1)
    return total


def _version(user, target: str) -> tuple:
    """One aggregate query that changes when the host's indexed texts change (the rows are read
    only then)."""
    rows = (Scene if target == SCENES else Summary).objects.filter(room__host=user)
    got = rows.aggregate(n=Count("pk"), top=Max("pk"), check=Sum(_checksum()))
    return got["n"], got["top"], got["check"]


def _indexed_rows(user, target: str) -> list[tuple]:
    """What the index holds for the host by the database: one row per embedded text, hash last."""
    if target == SCENES:
        rows = Scene.objects.filter(room__host=user).exclude(indexed_hash="")
        return list(rows.order_by("pk").values_list("room_id", "block", "indexed_hash"))
    rows = Summary.objects.filter(room__host=user).exclude(indexed_hash="")
    return list(rows.order_by("pk").values_list("room_id", "scope", "tier", "block", "indexed_hash"))


def _index_id(target: str, row: tuple) -> str:
    if target == SCENES:
        return index.scene_id(row[0], row[1])
    return f"m:{row[0]}:{row[1]}:{row[2]}:{row[3]}"  # as `memory.index.memory_id`


def _corpus(user, generation: VectorIndex, target: str) -> _Corpus:
    """The host's word index, brought up to date: only texts embedded since are fetched."""
    key = (generation.pk, target)
    version = _version(user, target)
    with _lock:
        found = _corpora.get(key)
        if found is not None and found.version == version:
            _corpora.move_to_end(key)
            return found
    rows = _indexed_rows(user, target)
    if found is not None and found.rows == rows:
        found.version = version  # e.g. a scene row that is not embedded yet
        return found
    hashes = {_index_id(target, row): row[-1] for row in rows}
    changed = [id_ for id_, digest in hashes.items() if found is None or found.hashes.get(id_) != digest]
    if found is None or len(changed) > max(REFETCH, len(hashes) // 2):
        ids, texts, metadatas = index.index_documents(generation, target, where={"host": user.pk})
        kept = [position for position, id_ in enumerate(ids) if id_ in hashes]
        ids = [ids[p] for p in kept]
        texts, metadatas = [texts[p] for p in kept], [metadatas[p] for p in kept]
        vocabulary = ranking.Vocabulary()
        encoded = [_encode(vocabulary, target, text) for text in texts]
    else:
        stale = set(changed)
        kept = [p for p, id_ in enumerate(found.ids) if id_ in hashes and id_ not in stale]
        fetched = index.index_records(generation, target, changed)
        vocabulary = found.vocabulary
        ids = [found.ids[p] for p in kept] + list(fetched)
        texts = [found.texts[p] for p in kept] + [text for text, _ in fetched.values()]
        metadatas = [found.metadatas[p] for p in kept] + [meta for _, meta in fetched.values()]
        encoded = [found.encoded[p] for p in kept] + [
            _encode(vocabulary, target, t) for t, _ in fetched.values()
        ]
    built = _Corpus(
        version=version,
        rows=rows,
        hashes=hashes,
        ids=ids,
        texts=texts,
        metadatas=metadatas,
        encoded=encoded,
        vocabulary=vocabulary,
        rooms=np.asarray([int(m.get("room") or 0) for m in metadatas], dtype=np.int64),
        at=np.asarray([int(m.get("at") or 0) for m in metadatas], dtype=np.int64),
        positions={id_: position for position, id_ in enumerate(ids)},
        words=ranking.LexicalIndex(_word_documents(target, encoded, metadatas), vocabulary),
    )
    with _lock:
        _corpora[key] = built
        _corpora.move_to_end(key)
        while len(_corpora) > CORPORA:
            _corpora.popitem(last=False)
    return built


def _encode(vocabulary: ranking.Vocabulary, target: str, text: str) -> ranking.Encoded:
    return vocabulary.encode_scene(text) if target == SCENES else vocabulary.encode_text(text)


def _word_documents(target: str, encoded: list[ranking.Encoded], metadatas: list[dict]) -> list[np.ndarray]:
    if target != SCENES:
        return [e.whole for e in encoded]
    places = [(int(m.get("room") or 0), int(m.get("block") or 0)) for m in metadatas]
    return ranking.with_neighbours(encoded, places)


# Filters -------------------------------------------------------------------------------------------------


def _stamp(day: dt.date) -> int:
    """Unix seconds of the day's first moment in the current time zone."""
    start = dt.datetime.combine(day, dt.time.min)
    return int(timezone.make_aware(start, timezone.get_current_timezone()).timestamp())


def vector_filter(rooms: list[int], at_from: int | None, at_to: int | None) -> dict:
    """The Chroma `where`: vectors of these rooms (the ones the user hosts now, narrowed by the
    filters), first message in [at_from, at_to).

    The collection is the host's own (one per host and embedding model) and the room list is read
    from the rooms table at every search, so it also shuts out a room handed to someone else, whose
    vectors still say the old host. A separate "host" clause would add nothing but time: each
    clause makes Chroma's query measurably slower (docs/benchmarks.md, "Search latency choices").
    """
    clauses: list[dict] = [{"room": {"$in": rooms}}]
    if at_from is not None:
        clauses.append({"at": {"$gte": at_from}})
    if at_to is not None:
        clauses.append({"at": {"$lt": at_to}})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _mask(corpus: _Corpus, rooms: list[int], at_from: int | None, at_to: int | None) -> np.ndarray:
    """The same filter over the word index's documents."""
    mask = np.isin(corpus.rooms, np.asarray(rooms, dtype=np.int64))
    if at_from is not None:
        mask &= corpus.at >= at_from
    if at_to is not None:
        mask &= corpus.at < at_to
    return mask


def _rooms(user, room_ids: list[int] | None, character_id: int | None) -> list[int]:
    rooms = Room.objects.filter(host=user)
    if room_ids is not None:
        rooms = rooms.filter(pk__in=room_ids)
    if character_id is not None:
        rooms = rooms.filter(pk__in=Seat.objects.filter(character_id=character_id).values("room_id"))
    return sorted(rooms.values_list("pk", flat=True))


# Search --------------------------------------------------------------------------------------------------


def search(
    user,
    *,
    target: str,
    q: str,
    room_ids: list[int] | None = None,
    character_id: int | None = None,
    date_from: dt.date | None = None,
    date_to: dt.date | None = None,
    offset: int = 0,
    limit: int = 10,
    fusion: ranking.Fusion | None = None,
) -> Results:
    """Return the matches nearest to `q` among the chats `user` hosts, best first.

    Never raises for a failing embedder or vector store: the notice says what happened in plain
    words (a failing embedder still leaves the matches by words). `fusion` is for the benchmark's
    baselines; the default is the measured best.
    """
    clock = time.perf_counter()
    lap = _Lap()
    fusion = fusion or ranking.Fusion()
    q = (q or "").strip()
    offset, limit = max(0, offset), max(1, limit)

    def done(results: Results) -> Results:
        results.ms = (time.perf_counter() - clock) * 1000
        results.timings = lap.timings
        return results

    if target not in TARGETS:
        return done(Results(notice=UNKNOWN_TARGET))
    if not q:
        return done(Results(notice=EMPTY_QUERY))
    generation = reading_generation(user)
    if generation is None:
        return done(Results(notice=NOT_INDEXED))
    rooms = _rooms(user, room_ids, character_id)
    if not rooms:
        return done(Results(notice=NO_ROOMS))
    at_from = _stamp(date_from) if date_from else None
    at_to = _stamp(date_to + dt.timedelta(days=1)) if date_to else None
    want = max(fusion.candidates, offset + limit)
    lap("scope")

    where = vector_filter(rooms, at_from, at_to)
    try:
        # Meaning (embed the query, then the filtered vector query) runs beside the word side.
        meaning = None
        if fusion.method != ranking.LEXICAL:
            meaning = _background().submit(_nearest, generation, target, q, where, want)
        corpus = _corpus(user, generation, target)
        lap("word_index")
        if not corpus.ids:
            return done(Results(notice=NOT_INDEXED))
        mask = _mask(corpus, rooms, at_from, at_to)
        lexical = [corpus.ids[doc] for doc, _ in corpus.words.top(q, want, mask)]
        lap("words")
        # The vectors of the best word matches (those the meaning side may not bring), meanwhile.
        early = None
        if meaning is not None and fusion.method != ranking.DENSE:
            early = _background().submit(
                index.index_vectors, generation, target, lexical[: 2 * (offset + limit)]
            )
        vector, dense, notice, stages = meaning.result() if meaning else (None, [], "", {})
        lap("wait")
        lap.timings.update(stages)
        order = _order(fusion, dense, lexical, words_only=vector is None)
        page = order[offset : offset + limit]
        documents = _documents(corpus, generation, target, page)
        cosines = dict(dense)
        if vector is not None:
            stored = early.result() if early else {}
            missing = [id_ for id_ in page if id_ not in cosines and id_ not in stored]
            stored |= index.index_vectors(generation, target, missing)
            for id_ in page:
                if id_ not in cosines and id_ in stored:
                    cosines[id_] = float(_unit(stored[id_]) @ vector)
    except Exception as exc:  # noqa: BLE001 - a vector store failure is reported, never a crash
        log.exception("corpus: could not search the index of user %s", user.pk)
        return done(Results(notice=STORE_FAILED.format(reason=_plain(exc))))

    best_cosine = dense[0][1] if dense else None
    best_text = _text_of(corpus, documents, order[0]) if order else ""
    close = bool(order) and ranking.judge_close(target, best_cosine, ranking.coverage(best_text, q))
    hits = _hits(target, q, page, documents, cosines)
    if not order and not notice:
        notice = NOTHING
    lap("hits")
    return done(Results(hits=hits, close=close, total=len(order), notice=notice, best_cosine=best_cosine))


def warm(user) -> Future | None:
    """Bring the user's word indexes up to date in the background (call it as the Explore page
    opens: a host's first search after a restart reads their whole index, which takes seconds
    for a large library; docs/benchmarks.md)."""
    generation = reading_generation(user)
    if generation is None:
        return None
    return _background().submit(_warm, user, generation)


def _warm(user, generation: VectorIndex) -> None:
    try:
        for target in TARGETS:
            _corpus(user, generation, target)
    except Exception:  # noqa: BLE001 - warming is a courtesy; the search itself reports problems
        log.exception("corpus: could not warm the word index of user %s", user.pk)
    finally:
        db.connections.close_all()


def _background() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="corpus-search")
    return _pool


def _nearest(
    generation: VectorIndex, target: str, q: str, where: dict, n: int
) -> tuple[np.ndarray | None, list[tuple[str, float]], str, dict[str, float]]:
    """Embed the query and ask the vector index; return (vector, (id, cosine)s, notice, ms per stage).

    Runs on a worker thread: a database connection it opened (a remote embedder's row) is closed."""
    lap = _Lap()
    try:
        try:
            vector = _query_vector(generation, q)
        except embedding.EmbedderFailed as exc:
            return None, [], WORDS_ONLY.format(reason=exc), lap.timings
        lap("embed")
        dense = index.query_index(generation, target, vector.tolist(), where=where, n=n)
        lap("vectors")
        return vector, dense, "", lap.timings
    finally:
        db.connections.close_all()


class _Lap:
    """Milliseconds per stage, each measured from the end of the one before."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self.last = time.perf_counter()

    def __call__(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = self.timings.get(stage, 0.0) + (now - self.last) * 1000
        self.last = now


def _order(
    fusion: ranking.Fusion, dense: list[tuple[str, float]], lexical: list[str], *, words_only: bool
) -> list[str]:
    if words_only or fusion.method == ranking.LEXICAL:
        return lexical
    if fusion.method == ranking.DENSE:
        return [id_ for id_, _ in dense]
    fused = ranking.fuse(
        [[id_ for id_, _ in dense], lexical], weights=[fusion.dense_weight, fusion.lexical_weight], k=fusion.k
    )
    return [id_ for id_, _ in fused]


def _plain(exc: Exception) -> str:
    return gateway.plain_error(exc)


def _unit(vector) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


def _documents(corpus: _Corpus, generation, target: str, ids: list[str]) -> dict[str, tuple[str, dict]]:
    """Text and metadata of these ids: from the word index, else (indexed since) from the store."""
    found = {
        id_: (corpus.texts[corpus.positions[id_]], corpus.metadatas[corpus.positions[id_]])
        for id_ in ids
        if id_ in corpus.positions
    }
    found.update(index.index_records(generation, target, [id_ for id_ in ids if id_ not in found]))
    return found


def _text_of(corpus: _Corpus, documents: dict, id_: str) -> str:
    if id_ in documents:
        return documents[id_][0]
    position = corpus.positions.get(id_)
    return corpus.texts[position] if position is not None else ""


def _when(stamp) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(int(stamp), tz=dt.UTC) if stamp else None


def _number(value) -> int | None:
    try:
        return None if value is None or int(value) < 0 else int(value)
    except (TypeError, ValueError):
        return None


def _summary_key(meta: dict) -> tuple[int, str, int, int]:
    """(room, scope, tier, block) of a memory's metadata: what identifies its Summary row."""
    return (
        int(meta.get("room") or 0),
        str(meta.get("scope") or ""),
        int(meta.get("tier") or 0),
        int(meta.get("block") or 0),
    )


def _summary_ids(room_ids: set[int], metas: list[dict]) -> dict[tuple[int, str, int, int], int]:
    wanted = {_summary_key(meta) for meta in metas}
    rows = Summary.objects.filter(
        room_id__in=room_ids, tier__in={key[2] for key in wanted}, block__in={key[3] for key in wanted}
    ).values_list("pk", "room_id", "scope", "tier", "block")
    return {
        (room, scope, tier, block): pk
        for pk, room, scope, tier, block in rows
        if (room, scope, tier, block) in wanted
    }


def _characters(target: str, meta: dict, seats: list[tuple[int, str]]) -> list[str]:
    """A scene's speaking characters, a personal memory's character; else the room's characters."""
    names = [name for _, name in seats]
    if target == SCENES:
        spoke = {name.strip() for name in str(meta.get("speakers") or "").split(",")}
        return [name for name in names if name in spoke] or names
    scope = str(meta.get("scope") or "")
    return [name for seat_id, name in seats if scope == f"seat-{seat_id}"] or names


def _hits(target: str, q: str, page: list[str], documents: dict, cosines: dict[str, float]) -> list[Hit]:
    """The page's hits with their room, characters and (for memories) summary row: three queries."""
    page = [id_ for id_ in page if id_ in documents]
    room_ids = {int(documents[id_][1].get("room") or 0) for id_ in page}
    titles = dict(Room.objects.filter(pk__in=room_ids).values_list("pk", "title"))
    seats: dict[int, list[tuple[int, str]]] = {}
    for seat_id, room_id, name in Seat.objects.filter(room_id__in=room_ids).values_list(
        "pk", "room_id", "name"
    ):
        seats.setdefault(room_id, []).append((seat_id, name))
    summaries = (
        _summary_ids(room_ids, [documents[id_][1] for id_ in page]) if target == MEMORIES and page else {}
    )
    hits = []
    for id_ in page:
        text, meta = documents[id_]
        room_id = int(meta.get("room") or 0)
        short = ranking.snippet(ranking.plain(text) if target == SCENES else text, q, SNIPPET)
        hits.append(
            Hit(
                target=target,
                room_id=room_id,
                room_title=titles.get(room_id, ""),
                characters=_characters(target, meta, seats.get(room_id, [])),
                block=int(meta.get("block") or 0),
                seq_from=_number(meta.get("seq_from")),
                seq_to=_number(meta.get("seq_to")),
                at=_when(meta.get("at")),
                text=text,
                snippet=short,
                score=ranking.match_score(cosines.get(id_)),
                summary_id=summaries.get(_summary_key(meta)) if target == MEMORIES else None,
                tier=_number(meta.get("tier")) if target == MEMORIES else None,
                marks=ranking.highlight(short, q),
                key=id_,
            )
        )
    return hits
