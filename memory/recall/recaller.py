"""Recall, the shell: read the pool's summaries, score them by meaning, rerank, find quotes, log.

The decisions are pure (`memory.recall.ranking`). Here: which rows to read (only the pool's, tier by
tier: a 100,000-message room reads a few hundred rows, not all of them), the summaries' vectors
(kept in memory between turns per index generation and text, so only new or rewritten summaries
are fetched from Chroma or embedded), the query's vector, the Rerank role, and the recall log.

Quotes (`memory.recall.quotes`) read the room's scrolled-out messages from a per-process copy kept
block by block (a block is read again only when its scene's text hash changes) with their BM25
statistics, and their nearest messages by meaning from the `turns` index.

Everything runs as the room's host: the host's tuning switch, embedding and rerank models.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np
from django.db.models import Count, Q

from memory import blocks, index
from memory import facts as fact_rules
from memory.drafts import when_label
from memory.models import SHARED, Fact, Scene, Summary, SummaryKeyword, VectorIndex, seat_scope
from memory.recall import fact_recall
from memory.recall import quotes as quoting
from memory.recall import ranking as recall
from memory.recall.why import Fit
from memory.selectors import (
    SearchUnavailable,
    block_tuning,
    facts_query,
    memory_on,
    message_lines,
    personal_memory_on,
    reading_generation,
    scene_note_text,
    tuning_get,
)
from orbchat.connections import embedding, reranker
from orbchat.connections.selectors import model_roles_get
from rooms.models import Member, Message, Presence, Room, Seat

log = logging.getLogger(__name__)

ROOMS_CACHED = 64  # rooms whose scrolled-out messages are kept in memory for quotes
VECTOR_CACHE = 50_000  # vectors kept in memory (about 75 MB of float32 at 384 dimensions)
SAMPLE = 12  # rejected summaries shown in the log, every reason represented
COMMON_SHARE = 0.05  # a keyword word in more than this share of a room's summaries tells nothing apart
SEARCH_FAILED = "Your library couldn't be searched ({reason}). This reply goes out without recalled memory."
RERANK_FAILED = "The Rerank model failed ({reason}); memories were picked in meaning order instead."


@dataclass
class Outcome:
    """One recall: the Memory section's text and everything the host may inspect."""

    state: str  # "off" (memory off: nothing ran) | "done"
    text: str = ""
    count: int = 0
    mode: str = recall.OFF
    query: str = ""
    messages: list[str] = field(default_factory=list)  # the recent messages the query was made of
    pool: int = 0
    live_start: int = 0
    budget: int = 0
    seat_id: int | None = None
    kept: list[recall.Scored] = field(default_factory=list)  # pinned and yours first, then recalled
    rejected: list[recall.Rejected] = field(default_factory=list)
    cut: list[recall.Rejected] = field(default_factory=list)  # left out for the memory budget
    rejected_count: int = 0
    notices: list[str] = field(default_factory=list)
    ms: float = 0.0
    written: int = 0  # summaries written for this reader
    best: float | None = None  # the best cosine in the pool
    fit: Fit | None = None  # how the history sat in the prompt (filled by the turn)
    why: str = ""  # why nothing was recalled, for the host
    quotes: list[quoting.Quote] = field(default_factory=list)  # oldest first
    quotes_rejected: list[quoting.Quote] = field(default_factory=list)  # best first, a few
    quotes_cut: list[quoting.Quote] = field(default_factory=list)  # left out for the memory budget
    facts: list[fact_recall.Picked] = field(default_factory=list)  # pinned, yours, then best first
    facts_rejected: list[fact_recall.Left] = field(default_factory=list)  # a sample, every reason
    facts_cut: list[fact_recall.Picked] = field(default_factory=list)  # left out for the memory budget
    scene: str = ""  # the scene note as sent ("" when none was)
    priority: tuple[str, ...] = fact_rules.BUDGET_PRIORITY

    def counts(self) -> dict:
        """How many of each kind went with the reply: all that a member may know."""
        return {
            "summaries": len(self.kept),
            "facts": len(self.facts),
            "quotes": len(self.quotes),
            "scene": 1 if self.scene else 0,
        }

    def preview(self) -> dict:
        """What the host's Preview shows of this recall: the memories sent, and those the budget cut."""
        return {
            "recalled": [
                {"label": s.item.label, "score": round(s.score, 4), "why": s.why, "text": s.item.text}
                for s in self.kept
            ],
            "quotes": [
                {"label": q.label, "score": round(q.score, 4), "why": _quote_reason(q), "text": q.line}
                for q in self.quotes
            ],
            "facts": [_fact_json(p) for p in self.facts],
            "scene": self.scene,
            "memory_cut": [r.item.label for r in self.cut]
            + [q.label for q in self.quotes_cut]
            + [_fact_label(p.fact) for p in self.facts_cut],
        }

    def detail(self) -> dict:
        """The host-only detail: query, pool, kept with scores, a sample of the rejected with reasons."""
        return {
            "state": self.state,
            "mode": self.mode,
            "query": self.query,
            "messages": list(self.messages),
            "pool": self.pool,
            "count": self.count,
            "live_start": self.live_start,
            "budget": self.budget,
            "seat": self.seat_id,
            "kept": [_kept_json(s) for s in self.kept],
            "rejected": [_rejected_json(r) for r in self.rejected],
            "rejected_count": self.rejected_count,
            "cut": [_rejected_json(r) for r in self.cut],
            "notices": list(self.notices),
            "ms": round(self.ms, 1),
            "best": None if self.best is None else round(self.best, 4),
            "fit": None if self.fit is None else asdict(self.fit),
            "why": self.why,
            "quotes": [_quote_json(q) for q in self.quotes],
            "quotes_rejected": [_quote_json(q) for q in self.quotes_rejected],
            "quotes_cut": [_quote_json(q) for q in self.quotes_cut],
            "facts": [_fact_json(p) for p in self.facts],
            "facts_rejected": [_fact_left_json(r) for r in self.facts_rejected],
            "facts_cut": [_fact_json(p) for p in self.facts_cut],
            "scene": self.scene,
            "priority": list(self.priority),
            "counts": self.counts(),
        }


def _fact_label(fact: fact_recall.Candidate) -> str:
    return f"Fact #{fact.id} · {fact.category}"


def _fact_json(picked: fact_recall.Picked) -> dict:
    fact = picked.fact
    return {
        "id": fact.id,
        "label": _fact_label(fact),
        "text": fact.text,
        "category": fact.category,
        "scope": fact.scope,
        "score": round(picked.score, 4),
        "relevance": round(picked.relevance, 4),
        "cosine": None if picked.cosine is None else round(picked.cosine, 4),
        "subject": picked.subject,
        "heat": round(fact.heat, 3),
        "confidence": round(fact.confidence, 3),
        "why": picked.why,
        "reason": picked.reason,
    }


def _fact_left_json(left: fact_recall.Left) -> dict:
    return {
        "id": left.fact.id,
        "label": _fact_label(left.fact),
        "reason": left.reason,
        "score": None if left.score is None else round(left.score, 4),
    }


def _quote_reason(quote: quoting.Quote) -> str:
    """Why a quote was chosen, in words: "words: key, priest · meaning 0.52"."""
    parts = []
    if quote.matched:
        parts.append("words: " + ", ".join(quote.matched[:6]))
    if quote.cosine is not None:
        parts.append(f"meaning {quote.cosine:.2f}")
    return " · ".join(parts) or quote.why


def _quote_json(quote: quoting.Quote) -> dict:
    return {
        "seq": quote.turn.seq,
        "speaker": quote.turn.speaker,
        "label": quote.label,
        "score": round(quote.score, 4),
        "bm25": round(quote.bm25, 3),
        "cosine": None if quote.cosine is None else round(quote.cosine, 4),
        "matched": list(quote.matched),
        "found_by": quote.why,
        "why": _quote_reason(quote),
        "text": quote.text,
    }


def _place(item: recall.Item) -> dict:
    return {k: getattr(item, k) for k in ("scope", "tier", "block", "seq_from", "seq_to")}


def _kept_json(s: recall.Scored) -> dict:
    return _place(s.item) | {
        "score": round(s.score, 4),
        "rerank": None if s.rerank is None else round(s.rerank, 4),
        "keyword": s.keyword,
        "why": s.why,
        "label": s.item.label,
        "text": s.item.text,
    }


def _rejected_json(r: recall.Rejected) -> dict:
    return _place(r.item) | {
        "reason": r.reason,
        "score": None if r.score is None else round(r.score, 4),
        "label": r.item.label,
    }


# Vectors of summaries, per (index generation or model key, summary key, text hash).
_vectors: OrderedDict[tuple[str, str, str], np.ndarray] = OrderedDict()
_vectors_lock = threading.Lock()


def _cached(keys: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], np.ndarray]:
    with _vectors_lock:
        found = {}
        for key in keys:
            vector = _vectors.get(key)
            if vector is not None:
                _vectors.move_to_end(key)
                found[key] = vector
        return found


def _remember(vectors: dict[tuple[str, str, str], np.ndarray]) -> None:
    with _vectors_lock:
        _vectors.update(vectors)
        while len(_vectors) > VECTOR_CACHE:
            _vectors.popitem(last=False)


def forget_cached_vectors() -> None:
    """Drop the in-memory vectors (tests; a changed embedding model gets new keys anyway)."""
    with _vectors_lock:
        _vectors.clear()


def _unit(vector) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


class _Embedder:
    """Embed with the generation recall reads (or the host's current model before any exists)."""

    def __init__(self, host, generation: VectorIndex | None) -> None:
        self.host, self.generation = host, generation
        self.tag = f"g{generation.pk}" if generation else embedding.model_key(host)
        self.builtin = (generation.model_key if generation else self.tag) == embedding.BUILTIN_KEY

    def __call__(self, texts: list[str]) -> list[np.ndarray]:
        if self.generation is not None:
            vectors = embedding.embed_with(self.generation.model_key, texts)
        else:
            vectors = embedding.embed(self.host, texts)
        return [_unit(v) for v in vectors]


def _fetcher(room_id: int, hashes: dict[str, str]) -> recall.Fetch:
    def fetch(scope: str, tier: int, start: int, end: int) -> list[recall.Item]:
        rows = Summary.objects.filter(
            room_id=room_id, scope=scope, tier=tier, seq_from__gte=start, seq_from__lt=end
        ).values_list("scope", "tier", "block", "seq_from", "seq_to", "text", "keywords", "indexed_hash")
        items = []
        for scope_, tier_, block, seq_from, seq_to, text, keywords, indexed in rows:
            key = f"m:{room_id}:{scope_}:{tier_}:{block}"
            hashes[key] = indexed
            items.append(
                recall.Item(key, scope_, tier_, block, seq_from, seq_to, text, tuple(keywords or ()))
            )
        return items

    return fetch


def _vectors_for(
    embedder: _Embedder, items: list[recall.Item], indexed: dict[str, str]
) -> dict[str, np.ndarray]:
    """Return each item's vector: from memory, else from Chroma (when indexed as is), else embedded now."""
    keys = {item.key: (embedder.tag, item.key, index.text_hash(item.text)) for item in items}
    found = _cached(list(keys.values()))
    missing = [item for item in items if keys[item.key] not in found]
    fresh: dict[tuple[str, str, str], np.ndarray] = {}
    if missing and embedder.generation is not None:
        stored = [item for item in missing if indexed.get(item.key) == keys[item.key][2]]
        if stored:
            got = index.memory_vectors(embedder.generation, [item.key for item in stored])
            for item in stored:
                if item.key in got:
                    fresh[keys[item.key]] = _unit(got[item.key])
    still = [item for item in missing if keys[item.key] not in fresh]
    if still:
        for item, vector in zip(still, embedder([item.text for item in still]), strict=True):
            fresh[keys[item.key]] = vector
    _remember(fresh)
    found.update(fresh)
    return {item.key: found[keys[item.key]] for item in items}


def _scope_names(room: Room, seat: Seat | None) -> list[str]:
    """The memory sets a speaker reads: the shared one, and its own when each has its own."""
    if seat is None or not personal_memory_on(room):
        return [SHARED]
    return [SHARED, seat_scope(seat.pk)]


def _scopes(room: Room, seat: Seat | None, upto: int, t: blocks.Tuning) -> tuple[list[str], set[int] | None]:
    """The scopes a speaker reads and the tier-0 blocks it witnessed (None: no presence filter)."""
    scopes = _scope_names(room, seat)
    if len(scopes) == 1:
        return scopes, None
    intervals = list(Presence.objects.filter(seat=seat).values_list("joined_seq", "left_seq"))
    return scopes, blocks.witnessed_blocks(intervals, tier=0, t=t, upto=upto)


def written_for(room: Room, seat: Seat | None) -> int:
    """How many memories `seat` (None: the Narrator) could read; 0: nothing is written yet."""
    return _total(room.pk, _scope_names(room, seat))


def recall_for(
    *,
    room: Room,
    seat: Seat | None,
    query_texts: list[str],
    live_start: int,
    budget: int,
    count: Callable[[str], int],
    tuning=None,
    total: int | None = None,
) -> Outcome:
    """Recall for a reply by `seat` (None: the Narrator) from everything before `live_start`.

    `query_texts` are the recent messages, newest last; the last `query_window` form the query.
    `total`, when the caller has counted it (`written_for`), is not counted again.
    Never raises for a provider problem: failures become notices in the outcome.
    """
    started = time.perf_counter()
    tuning = tuning or tuning_get()
    if not memory_on(room, tuning) or tuning.mode == recall.OFF:
        return Outcome(state="off", mode=recall.OFF)
    t = block_tuning(tuning)
    texts = [text for text in query_texts if text.strip()][-tuning.query_window :]
    query = "\n".join(texts)
    outcome = Outcome(
        state="done",
        mode=tuning.mode,
        query=query,
        messages=texts,
        live_start=live_start,
        budget=budget,
        seat_id=seat.pk if seat else None,
    )
    scopes, witnessed = _scopes(room, seat, live_start, t)
    total = _total(room.pk, scopes) if total is None else total
    outcome.written = total
    if total == 0:  # nothing written yet (a young chat, or memory never built): nothing to read
        outcome.ms = (time.perf_counter() - started) * 1000
        return outcome
    outcome.priority = _priority(tuning)
    always, always_out, _ = recall.always_first(
        _always(room.pk, scopes, witnessed, t), live_start=live_start, budget=budget, count=count
    )
    sent = {s.item.key for s in always} | {r.item.key for r in always_out}
    outcome.cut = [r for r in always_out if r.reason == recall.BUDGET]
    candidates, facts_out = _fact_candidates(room.pk, scopes, witnessed, t, live_start)
    scene = scene_note_text(room) if Message.objects.filter(room=room, seq__lt=live_start).exists() else ""
    indexed: dict[str, str] = {}
    pool = recall.without(
        recall.build_pool(
            _fetcher(room.pk, indexed), scopes=scopes, live_start=live_start, t=t, witnessed=witnessed
        ),
        sent,
    )
    outcome.pool = len(pool.members)
    people = _names(room)  # never a fact's subject match, nor a summary's keyword
    ignore = people

    def choose_facts(cosines: dict[int, float]) -> fact_recall.Choice:
        picked = fact_recall.choose(
            candidates,
            cosines=cosines,
            query=query,
            ignore=people,
            max_facts=tuning.facts_per_reply,
            floor=tuning.score_floor,
        )
        picked.rejected = facts_out + picked.rejected
        return _dated(room.pk, picked)

    hits: dict[str, list[tuple[recall.Item, str]]] = {}
    if tuning.keyword_match and tuning.mode in (recall.MIXC, recall.SEMANTIC):
        hits, common = _keyword_hits(room.pk, scopes, pool.members, query, live_start, ignore, indexed, total)
        hits = {key: [pair for pair in pairs if pair[0].key not in sent] for key, pairs in hits.items()}
        ignore |= common
    similarity: dict[str, float] = {}
    embedder: _Embedder | None = None
    query_vector = newest_vector = None
    if tuning.mode in (recall.MIXC, recall.SEMANTIC) and (pool.members or candidates):
        try:
            embedder = _Embedder(room.host, reading_generation(room.host))
            members = {item.key for item in pool.members}
            finer = {
                item.key: item for pairs in hits.values() for item, _ in pairs if item.key not in members
            }
            scored = pool.members + list(finer.values())
            vectors = _vectors_for(embedder, scored, indexed)
            query_vector, newest_vector = _query_vectors(embedder, texts)
        except Exception as exc:  # noqa: BLE001 - any search failure: a notice, and no memory
            reason = exc.args[0] if isinstance(exc, embedding.EmbedderFailed) and exc.args else str(exc)
            outcome.notices.append(SEARCH_FAILED.format(reason=reason or "the embedder failed"))
            _fill(outcome, always, [], choose_facts({}), scene, budget, count)
            _finish(outcome, always_out, started)
            outcome.rejected_count = max(0, total - len(outcome.kept))
            return outcome
        if scored:
            matrix = np.stack([vectors[item.key] for item in scored])
            scores = matrix @ query_vector
            similarity = {item.key: float(s) for item, s in zip(scored, scores, strict=True)}
            outcome.best = max(similarity.values(), default=None)

    def finer(best: list[recall.Scored]) -> dict[str, list[recall.Item]]:
        inside = _tier0_inside(
            room.pk, [s.item for s in best if s.item.tier > 0], live_start, witnessed, t, indexed
        )
        inside = {key: [item for item in group if item.key not in sent] for key, group in inside.items()}
        items = [item for group in inside.values() for item in group if item.key not in similarity]
        if items and embedder is not None:
            vectors = _vectors_for(embedder, items, indexed)
            similarity.update({item.key: float(vectors[item.key] @ query_vector) for item in items})
        return inside

    def rerank(shortlist: list[recall.Scored]) -> list[float] | None:
        try:
            return _rerank(room.host, embedder, query, texts[-1] if texts else "", shortlist)
        except Exception as exc:  # noqa: BLE001 - a failed reranker falls back to the meaning order
            outcome.notices.append(RERANK_FAILED.format(reason=_reason(exc)))
            return None

    # Each part is chosen against the whole budget; `_fill` then fits them in the budget's order.
    choice = recall.choose(
        pool,
        mode=tuning.mode,
        similarity=similarity,
        query=query,
        floor=tuning.score_floor,
        keyword_match=tuning.keyword_match,
        candidates=tuning.candidates,
        keep=tuning.keep,
        budget=budget,
        count=count,
        rerank=rerank,
        hits=hits,
        ignore=ignore,
        finer=finer if embedder is not None else None,
    )
    cosines = (
        _fact_cosines(room, scopes, query_vector, max(FACT_CANDIDATES, tuning.facts_per_reply))
        if candidates and query_vector is not None
        else {}
    )
    outcome.cut += [r for r in choice.rejected if r.reason == recall.BUDGET]
    if tuning.quotes_on and tuning.quotes > 0 and tuning.mode in (recall.MIXC, recall.SEMANTIC):
        _quotes(
            outcome,
            room,
            embedder,
            newest_vector,
            texts,
            live_start,
            witnessed,
            t,
            tuning,
            ignore,
            budget,
            count,
        )
    _fill(outcome, always, choice.kept, choose_facts(cosines), scene, budget, count)
    rejected = (
        always_out
        + choice.rejected
        + _covered_sample(room.pk, choice.kept)
        + _live_sample(room.pk, scopes, live_start)
    )
    _finish(outcome, rejected, started)
    outcome.rejected_count = max(total - len(outcome.kept), len(rejected))
    return outcome


FACT_CANDIDATES = 24  # facts nearest by meaning read from the index per reply (or Facts per reply)


def _priority(tuning) -> tuple[str, ...]:
    try:
        return fact_recall.parse_priority(tuning.budget_priority)
    except ValueError:
        return fact_rules.BUDGET_PRIORITY


def _fact_candidates(
    room_id: int, scopes: list[str], witnessed: set[int] | None, t: blocks.Tuning, live_start: int
) -> tuple[list[fact_recall.Candidate], list[fact_recall.Left]]:
    """The active facts of the speaker's scopes it was present for, pinned and yours newest
    first; and those left out as still in the live history or not witnessed."""
    rows = (
        Fact.objects.filter(room_id=room_id, scope__in=scopes, status=Fact.Status.ACTIVE)
        .order_by("-pinned", "-updated_at", "-pk")
        .values_list(
            "pk",
            "text",
            "category",
            "confidence",
            "heat",
            "pinned",
            "source",
            "subjects",
            "first_seq",
            "last_seq",
            "scope",
        )
    )
    found: list[fact_recall.Candidate] = []
    left: list[fact_recall.Left] = []
    for pk, text, category, confidence, heat, pinned, source, subjects, first, last, scope in rows:
        fact = fact_recall.Candidate(
            id=pk,
            text=text,
            category=category,
            confidence=confidence,
            heat=heat,
            pinned=pinned,
            yours=source == Fact.Source.PERSON,
            subjects=tuple(str(s) for s in subjects or ()),
            first_seq=first,
            last_seq=last,
            scope=scope,
        )
        if first is not None and first >= live_start:
            left.append(fact_recall.Left(fact, fact_recall.LIVE))
        elif not fact_recall.witnessed(first, last, witnessed, lambda seq: blocks.block_of(seq, 0, t)):
            left.append(fact_recall.Left(fact, fact_recall.WITNESS))
        else:
            found.append(fact)
    return found, left


def _dated(room_id: int, choice: fact_recall.Choice) -> fact_recall.Choice:
    """The choice with each fact to send given the days of its messages (one query for all)."""
    chosen = [*choice.pinned, *choice.yours, *choice.recalled]
    seqs = {seq for p in chosen for seq in (p.fact.first_seq, p.fact.last_seq) if seq is not None}
    if not seqs:
        return choice
    sent = dict(Message.objects.filter(room_id=room_id, seq__in=seqs).values_list("seq", "created_at"))

    def dated(picked: list[fact_recall.Picked]) -> list[fact_recall.Picked]:
        out = []
        for p in picked:
            when = when_label([sent.get(p.fact.first_seq), sent.get(p.fact.last_seq)])
            out.append(replace(p, fact=replace(p.fact, when=when)) if when else p)
        return out

    return replace(
        choice, pinned=dated(choice.pinned), yours=dated(choice.yours), recalled=dated(choice.recalled)
    )


def _fact_cosines(room: Room, scopes: list[str], query_vector, limit: int) -> dict[int, float]:
    """Each nearby fact's cosine to the query, from the facts index ({} when it cannot be searched)."""
    try:
        return {fact.pk: cosine for fact, cosine in facts_query(room, scopes, query_vector.tolist(), limit)}
    except SearchUnavailable as exc:
        log.warning("facts: the index could not be searched: %s", exc)
        return {}


def _fill(
    outcome: Outcome,
    always: list[recall.Scored],
    summaries: list[recall.Scored],
    chosen: fact_recall.Choice,
    scene: str,
    budget: int,
    count: Callable[[str], int],
) -> None:
    """Fit everything chosen into the memory budget in the tuned order (`memory.facts.budget_order`):
    pinned, yours, the scene note, facts, summaries, quotes by default."""
    # Each entry: (the chosen thing, its text as the Memory section holds it).
    parts = {
        "pinned": [(s, s.item.text) for s in always if s.why == recall.PINNED]
        + [(p, p.line) for p in chosen.pinned],
        "yours": [(s, s.item.text) for s in always if s.why != recall.PINNED]
        + [(p, p.line) for p in chosen.yours],
        "scene": [(scene, fact_recall.scene_text(scene))] if scene.strip() else [],
        "facts": [(p, p.line) for p in chosen.recalled],
        "summaries": [(s, s.item.text) for s in sorted(summaries, key=lambda s: -s.score)],
        "quotes": [(q, q.line) for q in sorted(outcome.quotes, key=lambda q: -q.score)],
    }
    # Facts sit in three parts, so their heading is set aside first; the quotes' is paid by the
    # first quote to go.
    heading = count(fact_recall.FACTS_HEADING) if chosen.pinned or chosen.yours or chosen.recalled else 0
    fitted = fact_rules.budget_order(
        parts,
        priority=outcome.priority,
        budget=max(0, budget - heading),
        cost=lambda entry: count(entry[1]),
        overhead={"quotes": count(quoting.HEADING)},
    )
    taken = {id(entry[0]) for entries in fitted.values() for entry in entries}
    kept_always = [s for s in always if id(s) in taken]
    kept_summaries = sorted(
        (s for s in summaries if id(s) in taken), key=lambda s: (s.item.seq_from, -s.item.tier)
    )
    outcome.kept = kept_always + kept_summaries
    outcome.cut += [
        recall.Rejected(s.item, recall.BUDGET, s.score or None)
        for s in [*always, *summaries]
        if id(s) not in taken
    ]
    everyone = [*chosen.pinned, *chosen.yours, *chosen.recalled]
    outcome.facts = [p for p in everyone if id(p) in taken]
    outcome.facts_cut = [p for p in everyone if id(p) not in taken]
    outcome.facts_rejected = recall.sample(chosen.rejected, SAMPLE)  # reasons and scores, as summaries'
    outcome.scene = scene if fitted.get("scene") else ""
    outcome.quotes_cut += [q for q in outcome.quotes if id(q) not in taken]
    outcome.quotes = sorted((q for q in outcome.quotes if id(q) in taken), key=lambda q: q.turn.seq)


def _quotes(
    outcome: Outcome,
    room: Room,
    embedder: _Embedder | None,
    query_vector,
    texts: list[str],
    live_start: int,
    witnessed: set[int] | None,
    t: blocks.Tuning,
    tuning,
    ignore: frozenset[str],
    budget: int,
    count: Callable[[str], int],
) -> None:
    """Find the reply's quotes (by words and by meaning) and fit them in what the budget leaves."""
    turns, lexicon = _room_turns(room)
    if not turns:
        return

    def allowed(seq: int) -> bool:
        return seq < live_start and (witnessed is None or blocks.block_of(seq, 0, t) in witnessed)

    cosines: dict[int, float] = {}
    generation = embedder.generation if embedder is not None else reading_generation(room.host)
    if generation is not None:
        try:
            if query_vector is None:
                _, query_vector = _query_vectors(embedder or _Embedder(room.host, generation), texts)
            cosines = index.query_turns(
                generation, query_vector.tolist(), room_id=room.pk, before=live_start, n=quoting.CANDIDATES
            )
        except Exception as exc:  # noqa: BLE001 - the meaning route fails alone: quotes by words still
            log.warning("quotes: the turns index could not be searched: %s", exc)
    found = quoting.find(
        turns,
        lexicon,
        query=texts,
        cosines=cosines,
        floor=tuning.score_floor,
        count=tuning.quotes,
        allowed=allowed,
        ignore=ignore,
    )
    outcome.quotes, outcome.quotes_cut = quoting.fit(found.kept, budget=budget, count=count)
    outcome.quotes_rejected = found.rejected[:SAMPLE]


class _RoomTurns:
    """A room's indexed messages (those of its scenes) and their BM25 statistics."""

    def __init__(self) -> None:
        self.hashes: dict[int, str] = {}  # block -> the scene's text hash when read
        self.seqs: dict[int, list[int]] = {}  # block -> its messages
        self.turns: dict[int, quoting.Turn] = {}
        self.lexicon = quoting.Lexicon()
        self.lock = threading.Lock()

    def drop(self, block: int) -> None:
        for seq in self.seqs.pop(block, ()):
            self.turns.pop(seq, None)
            self.lexicon.remove(seq)
        self.hashes.pop(block, None)


_turns: OrderedDict[int, _RoomTurns] = OrderedDict()
_turns_lock = threading.Lock()


def _room_turns(room: Room) -> tuple[dict[int, quoting.Turn], quoting.Lexicon]:
    """The room's messages held by its scenes, read again only for blocks whose text changed."""
    with _turns_lock:
        cached = _turns.get(room.pk)
        if cached is None:
            cached = _turns[room.pk] = _RoomTurns()
        _turns.move_to_end(room.pk)
        while len(_turns) > ROOMS_CACHED:
            _turns.popitem(last=False)
    with cached.lock:
        scenes = {
            block: (digest, seq_from, seq_to)
            for block, digest, seq_from, seq_to in Scene.objects.filter(room=room).values_list(
                "block", "text_hash", "seq_from", "seq_to"
            )
        }
        for block in [b for b in cached.hashes if b not in scenes]:
            cached.drop(block)
        changed = [b for b, (digest, _, _) in scenes.items() if cached.hashes.get(b) != digest]
        if changed:
            for block in changed:
                cached.drop(block)
            first = min(scenes[b][1] for b in changed)
            last = max(scenes[b][2] for b in changed)
            ranges = sorted((scenes[b][1], scenes[b][2], b) for b in changed)
            lines = message_lines(room, first, last + 1)
            position = 0
            for line in lines:
                while position < len(ranges) and ranges[position][1] < line.seq:
                    position += 1
                if position == len(ranges):
                    break
                start, _, block = ranges[position]
                if line.seq < start:
                    continue
                cached.turns[line.seq] = quoting.Turn(line.seq, line.speaker, line.text, line.when)
                cached.lexicon.add(line.seq, line.text)
                cached.seqs.setdefault(block, []).append(line.seq)
            for block in changed:
                cached.hashes[block] = scenes[block][0]
        return dict(cached.turns), cached.lexicon


def _finish(outcome: Outcome, rejected: list[recall.Rejected], started: float) -> None:
    """Lay out the kept memories and quotes as text, count them, sample the rejected, stamp the time."""
    outcome.count = len(outcome.kept) + len(outcome.quotes) + len(outcome.facts)
    outcome.text = memory_layout(outcome)
    outcome.rejected = recall.sample(rejected, SAMPLE)
    outcome.rejected_count = len(rejected)
    outcome.ms = (time.perf_counter() - started) * 1000


def memory_layout(outcome: Outcome) -> str:
    """The Memory section's body: the summaries (oldest first), the quotes, the lasting facts,
    then the scene as it stands (nearest the live history it leads into)."""
    parts = (
        recall.memory_text(outcome.kept),
        quoting.quotes_text(outcome.quotes),
        fact_recall.facts_text(outcome.facts),
        fact_recall.scene_text(outcome.scene),
    )
    return "\n\n".join(part for part in parts if part)


def _always(
    room_id: int, scopes: list[str], witnessed: set[int] | None, t: blocks.Tuning
) -> list[tuple[recall.Item, str]]:
    """The speaker's pinned and person-written memories, newest change first."""
    rows = (
        Summary.objects.filter(
            Q(pinned=True) | Q(source=Summary.Source.PERSON), room_id=room_id, scope__in=scopes
        )
        .order_by("-updated_at", "-pk")
        .values_list("scope", "tier", "block", "seq_from", "seq_to", "text", "keywords", "pinned")
    )
    found = []
    for scope, tier, block, seq_from, seq_to, text, keywords, pinned in rows:
        item = recall.Item(
            f"m:{room_id}:{scope}:{tier}:{block}",
            scope,
            tier,
            block,
            seq_from,
            seq_to,
            text,
            tuple(keywords or ()),
        )
        if tier != Summary.ADDED and not recall.witnessed_item(item, witnessed, t):
            continue
        found.append((item, recall.PINNED if pinned else recall.YOURS))
    return found


def _query_vectors(embedder: _Embedder, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The query's vectors: for summaries, the recent messages embedded one by one, the message
    just sent counting twice, so a long earlier message does not drown the question; for quotes,
    the message just sent alone (a passage is one thought: the earlier message's words would pull
    in its own look-alikes from the past)."""
    if not texts:
        blank = embedder([" "])[0]
        return blank, blank
    vectors = embedder(texts)
    combined = sum(vectors[:-1], np.zeros_like(vectors[-1])) + 2 * vectors[-1]
    return _unit(combined), _unit(vectors[-1])


def _tier0_inside(
    room_id: int,
    rollups: list[recall.Item],
    live_start: int,
    witnessed: set[int] | None,
    t: blocks.Tuning,
    indexed: dict[str, str],
) -> dict[str, list[recall.Item]]:
    """The tier-0 summaries inside each roll-up (same scope, scrolled out, witnessed)."""
    inside: dict[str, list[recall.Item]] = {rollup.key: [] for rollup in rollups}
    if not rollups:
        return inside
    ranges = Q()
    for rollup in rollups:
        ranges |= Q(scope=rollup.scope, seq_from__gte=rollup.seq_from, seq_from__lte=rollup.seq_to)
    rows = Summary.objects.filter(ranges, room_id=room_id, tier=0, seq_to__lt=live_start).values_list(
        "scope", "tier", "block", "seq_from", "seq_to", "text", "keywords", "indexed_hash"
    )
    for scope, tier, block, seq_from, seq_to, text, keywords, indexed_hash in rows:
        key = f"m:{room_id}:{scope}:{tier}:{block}"
        item = recall.Item(key, scope, tier, block, seq_from, seq_to, text, tuple(keywords or ()))
        if not recall.witnessed_item(item, witnessed, t):
            continue
        indexed[key] = indexed_hash
        for rollup in rollups:
            if rollup.scope == scope and rollup.seq_from <= seq_from <= rollup.seq_to:
                inside[rollup.key].append(item)
                break
    return inside


def _reason(exc: BaseException) -> str:
    return str(exc.args[0]) if exc.args else exc.__class__.__name__


def _rerank(
    host, embedder: _Embedder | None, query: str, newest: str, shortlist: list[recall.Scored]
) -> list[float]:
    same_model = embedder is not None and embedder.builtin
    return reranker.recall_scores(
        model_roles_get(user=host),
        query,
        [s.item.text for s in shortlist],
        newest=newest,
        cosines=[s.score for s in shortlist] if same_model else None,
    )


def _names(room: Room) -> frozenset[str]:
    """Casefolded names (and their words) of everyone in the room: never a keyword match."""
    names = list(Seat.objects.filter(room=room).values_list("name", flat=True))
    names.append(room.host.get_username())
    if room.persona_id:
        names.append(room.persona.name)
    names += list(Member.objects.filter(room=room).values_list("user__username", flat=True))
    names += list(
        Member.objects.filter(room=room, persona__isnull=False).values_list("persona__name", flat=True)
    )
    forms = set()
    for name in names:
        forms.add(name.casefold())
        forms.update(word for word in re.findall(r"\w+", name.casefold()) if len(word) >= 2)
    return frozenset(forms)


def _keyword_hits(
    room_id: int,
    scopes: list[str],
    pool: list[recall.Item],
    query: str,
    live_start: int,
    ignore: frozenset[str],
    indexed: dict[str, str],
    total: int,
) -> tuple[dict[str, list[tuple[recall.Item, str]]], frozenset[str]]:
    """Find summaries of any tier whose keywords appear in the query (one indexed lookup) and
    match them to the pool (see `recall.keyword_hits`).

    Also return the words too common to tell stretches apart (in more than a fifth of the
    room's summaries, like a name everyone says): they match nothing.
    """
    words = {w for w in re.findall(r"\w+", query.casefold()) if len(w) >= 2} - ignore
    if not words or not pool:
        return {}, frozenset()
    counts = dict(
        SummaryKeyword.objects.filter(room_id=room_id, word__in=words)
        .values_list("word")
        .annotate(n=Count("pk"))
        .values_list("word", "n")
    )
    limit = max(3, COMMON_SHARE * total)
    common = frozenset(word for word, n in counts.items() if n > limit)
    rare = [word for word in counts if word not in common]
    rows = list(
        SummaryKeyword.objects.filter(
            room_id=room_id, word__in=rare, summary__scope__in=scopes, summary__seq_to__lt=live_start
        ).values_list("word", "keyword", "summary_id", "summary__seq_to")
    )
    skip = ignore | common
    said = recall.Words(query)
    matched: dict[int, str] = {}
    for _, keyword, summary_id, _ in rows:
        if summary_id not in matched and recall.keyword_in([keyword], said, skip):
            matched[summary_id] = keyword
    if not matched:
        return {}, common
    found = []
    for pk, scope, tier, block, seq_from, seq_to, text, keywords, indexed_hash in Summary.objects.filter(
        pk__in=matched
    ).values_list("pk", "scope", "tier", "block", "seq_from", "seq_to", "text", "keywords", "indexed_hash"):
        key = f"m:{room_id}:{scope}:{tier}:{block}"
        indexed[key] = indexed_hash
        found.append(
            (recall.Item(key, scope, tier, block, seq_from, seq_to, text, tuple(keywords or ())), matched[pk])
        )
    return recall.keyword_hits(pool, found), common


def _covered_sample(room_id: int, kept: list[recall.Scored]) -> list[recall.Rejected]:
    """Finer summaries inside a kept roll-up: shown as "covered by a higher tier" (a few)."""
    rollups = [s.item for s in kept if s.item.tier > 0]
    if not rollups:
        return []
    top = max(rollups, key=lambda item: item.tier)
    rows = Summary.objects.filter(
        room_id=room_id,
        scope=top.scope,
        tier__lt=top.tier,
        seq_from__gte=top.seq_from,
        seq_from__lte=top.seq_to,
    ).values_list("scope", "tier", "block", "seq_from", "seq_to", "text")[:4]
    others = [recall.Item(f"m:{room_id}:{r[0]}:{r[1]}:{r[2]}", *r) for r in rows]
    return recall.covered([top], others)


def _live_sample(room_id: int, scopes: list[str], live_start: int) -> list[recall.Rejected]:
    """A few summaries of what the prompt still holds word for word (for the log)."""
    rows = (
        Summary.objects.filter(room_id=room_id, scope__in=scopes, tier=0, seq_to__gte=live_start)
        .order_by("seq_from")
        .values_list("scope", "tier", "block", "seq_from", "seq_to", "text")[:4]
    )
    return [recall.Rejected(recall.Item(f"m:{room_id}:{r[0]}:{r[1]}:{r[2]}", *r), recall.LIVE) for r in rows]


def _total(room_id: int, scopes: list[str]) -> int:
    return Summary.objects.filter(room_id=room_id, scope__in=scopes).count()
