"""Ranking for the Corpus, the pure part: no Django, no vector store, no network.

The words of a text (`terms`), a BM25 index over a host's scene or memory texts (`LexicalIndex`,
vectorised with numpy), reciprocal-rank fusion of the meaning and the word rankings (`fuse`), the
"is anything really close?" judgement per target (`judge_close`), and what a result shows: the
window of its text with the most query words (`snippet`), cut into highlighted and plain segments
(`highlight`).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from orbchat.stopwords import ENGLISH as STOPWORDS

SCENES = "scenes"
MEMORIES = "memories"
TARGETS = (SCENES, MEMORIES)

# A word: letters and digits of any script (not "_"), with inner apostrophes ("didn't").
_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
# A scene line starts "#<seq> Speaker: "; the seq number is a position, not something said.
_SEQ_RE = re.compile(r"^#\d+ ", re.MULTILINE)
_MESSAGE_SPLIT_RE = re.compile(r"\n(?=#\d+ )")
_PART_RE = re.compile(r"[^\W_]+")

FUSED = "fused"
DENSE = "dense"
LEXICAL = "lexical"
METHODS = (FUSED, DENSE, LEXICAL)
# Measured on LoCoMo (`python -m bench corpus`): a small k trusts each side's first places more
# than the customary 60 (hit@10 0.850 at k=60, 0.917 at k=5), the words side is the stronger one
# on chat transcripts (weight 1.5), and 30 candidates from each side do as well as 50 or 100.
RRF_K = 5
LEXICAL_WEIGHT = 1.5
CANDIDATES = 30
# A scene's words index with the last message of the scene before and the first of the one after:
# a moment cut by a block boundary is still found by its words (docs/benchmarks.md).
NEIGHBOUR_MESSAGES = 1  # (0 or 1)

# The best hit is "really close" at or above this cosine (per target), or when it holds every
# content word of the query. Calibrated with `python -m bench corpus --memories`: the cosine that
# best separates LoCoMo questions whose evidence was found from off-topic and gibberish queries
# (the shares each value judges close: docs/benchmarks.md, "Closeness threshold").
CLOSE_COSINE = {SCENES: 0.31, MEMORIES: 0.35}


# Words -----------------------------------------------------------------------------------------


def plain(text: str) -> str:
    """The text without scene lines' "#<seq> " prefixes (what a person reads)."""
    return _SEQ_RE.sub("", text)


@functools.lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """A light English suffix strip, so "keys", "lied" and "lies" meet "key" and "lie".

    Deliberately timid: short words and words of other scripts come back unchanged.
    """
    if len(word) <= 3 or not word.isascii():
        return word
    if word.endswith("ied") and len(word) == 4:
        return word[:-1]  # "lied" -> "lie", "died" -> "die"
    for suffix, replacement, keep in (
        ("ies", "y", 2),
        ("ied", "y", 2),
        ("sses", "ss", 2),
        ("ing", "", 3),
        ("ed", "", 3),
        ("es", "", 3),
        ("s", "", 3),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= keep:
            base = word[: len(word) - len(suffix)] + replacement
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            if suffix == "es" and not base.endswith(("s", "x", "z", "ch", "sh")):
                return word[:-1]  # "notes" -> "note", not "not"
            if suffix in ("ing", "ed") and len(base) > 2 and base[-1] == base[-2] and base[-1] not in "lsz":
                base = base[:-1]  # "stopped" -> "stop"
            return base
    return word


def words(text: str) -> list[str]:
    """Every word of the text, casefolded (stopwords included)."""
    return [match.group().casefold().replace("’", "'") for match in _WORD_RE.finditer(text)]


def terms(text: str) -> list[str]:
    """The searchable terms of a text: its words (split at apostrophes) less stopwords and seq
    prefixes, stemmed."""
    return [
        stem(part) for part in _PART_RE.findall(_SEQ_RE.sub("", text).casefold()) if part not in STOPWORDS
    ]


def query_terms(query: str) -> list[str]:
    """The query's distinct terms, in order."""
    return list(dict.fromkeys(terms(query)))


def messages(scene: str) -> list[str]:
    """A scene's messages ("#<seq> Speaker: text", a text may span lines)."""
    return [part for part in _MESSAGE_SPLIT_RE.split(scene) if part.strip()]


# The lexical index -------------------------------------------------------------------------------


class Vocabulary:
    """Term ids shared by the documents of one index; it only grows."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def encode(self, text: str) -> np.ndarray:
        """The text's terms as term ids, in order."""
        ids = self.ids
        return np.fromiter((ids.setdefault(t, len(ids)) for t in terms(text)), dtype=np.int32)

    def encode_scene(self, text: str) -> Encoded:
        """A scene's term ids, with those of its first and last message apart (its neighbours lend them)."""
        parts = [self.encode(message) for message in messages(text)] or [np.zeros(0, dtype=np.int32)]
        return Encoded(np.concatenate(parts), parts[0], parts[-1])

    def encode_text(self, text: str) -> Encoded:
        whole = self.encode(text)
        return Encoded(whole, whole[:0], whole[:0])


@dataclass(frozen=True)
class Encoded:
    """One document's term ids: all of them, its first message's and its last message's."""

    whole: np.ndarray
    head: np.ndarray
    tail: np.ndarray


def with_neighbours(
    encoded: Sequence[Encoded], places: Sequence[tuple[int, int]], lend: bool = NEIGHBOUR_MESSAGES > 0
) -> list[np.ndarray]:
    """Each scene's term ids with the last message of the scene before it and the first of the one
    after (same room, adjacent blocks); `places` are the scenes' (room, block)."""
    if not lend:
        return [e.whole for e in encoded]
    at = {place: position for position, place in enumerate(places)}
    joined = []
    for own, (room, block) in zip(encoded, places, strict=True):
        before, after = at.get((room, block - 1)), at.get((room, block + 1))
        parts = [encoded[before].tail] if before is not None else []
        parts.append(own.whole)
        if after is not None:
            parts.append(encoded[after].head)
        joined.append(np.concatenate(parts) if len(parts) > 1 else own.whole)
    return joined


class LexicalIndex:
    """Okapi BM25 (k1=1.2, b=0.75) over a fixed list of documents (term-id arrays).

    Postings are stored term by term (an inverted index: term -> documents and their BM25 weight,
    computed once), so a query touches only the postings of its own terms. Built with numpy in
    one pass: a host's 12,500 scenes take a fraction of a second once their terms are known.
    """

    def __init__(
        self, documents: Sequence[np.ndarray], vocabulary: Vocabulary, *, k1: float = 1.2, b: float = 0.75
    ) -> None:
        self.size = len(documents)
        self.vocabulary = vocabulary
        lengths = np.asarray([len(d) for d in documents], dtype=np.int64)
        flat = np.concatenate([*documents, np.zeros(0, dtype=np.int32)]).astype(np.int64)
        owners = np.repeat(np.arange(self.size, dtype=np.int64), lengths)
        postings, tf = np.unique(flat * max(1, self.size) + owners, return_counts=True)  # term-major
        terms_, self.docs = np.divmod(postings, max(1, self.size))
        frequency = np.bincount(terms_, minlength=len(vocabulary))
        self.pointers = np.concatenate([[0], np.cumsum(frequency)]).astype(np.int64)
        idf = np.log1p((self.size - frequency + 0.5) / (frequency + 0.5))
        average = float(lengths.mean()) if self.size and lengths.sum() else 1.0
        norm = k1 * (1 - b + b * lengths[self.docs] / average)
        self.weights = (idf[terms_] * tf * (k1 + 1) / (tf + norm)).astype(np.float32)

    @classmethod
    def of_texts(cls, texts: Sequence[str], **options: float) -> LexicalIndex:
        vocabulary = Vocabulary()
        return cls([vocabulary.encode(text) for text in texts], vocabulary, **options)

    def scores(self, query: str) -> np.ndarray:
        """BM25 of every document for the query's distinct terms (0 where none occurs)."""
        scores = np.zeros(self.size, dtype=np.float32)
        for term in query_terms(query):
            position = self.vocabulary.ids.get(term)
            if position is None or position + 1 >= len(self.pointers):
                continue
            start, end = self.pointers[position], self.pointers[position + 1]
            scores[self.docs[start:end]] += self.weights[start:end]  # one posting per document
        return scores

    def top(self, query: str, k: int, mask: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The best `k` (document, score) with a score above 0, best first; `mask` keeps only the
        documents it marks True (applied before ranking)."""
        scores = self.scores(query)
        if mask is not None:
            scores = np.where(mask, scores, 0.0)
        found = np.flatnonzero(scores > 0)
        if found.size > k:
            found = found[np.argpartition(-scores[found], k - 1)[:k]]
        ordered = sorted(found.tolist(), key=lambda doc: (-scores[doc], doc))
        return [(doc, float(scores[doc])) for doc in ordered]


# Fusion ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fusion:
    """How the two rankings are combined (defaults measured with `python -m bench corpus`)."""

    method: str = FUSED  # or DENSE / LEXICAL alone (the benchmark's baselines)
    candidates: int = CANDIDATES  # taken from each side (at least the page asked for)
    dense_weight: float = 1.0
    lexical_weight: float = LEXICAL_WEIGHT
    k: int = RRF_K


def fuse(
    rankings: Sequence[Sequence[Hashable]], *, weights: Sequence[float] | None = None, k: int = RRF_K
) -> list[tuple[Hashable, float]]:
    """Reciprocal-rank fusion: each ranking gives an item weight / (k + rank); best sum first.

    Ties keep the order of first appearance (the first ranking's order wins).
    """
    weights = weights or [1.0] * len(rankings)
    total: dict[Hashable, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, key in enumerate(ranking, 1):
            total[key] = total.get(key, 0.0) + weight / (k + rank)
    order = {key: position for position, key in enumerate(total)}
    return sorted(total.items(), key=lambda pair: (-pair[1], order[pair[0]]))


# Closeness and scores ----------------------------------------------------------------------------


def coverage(text: str, query: str) -> float:
    """Share of the query's distinct terms found in the text (0.0 for a query of no terms)."""
    wanted = query_terms(query)
    if not wanted:
        return 0.0
    have = set(terms(text))
    return sum(term in have for term in wanted) / len(wanted)


def judge_close(target: str, best_cosine: float | None, best_coverage: float) -> bool:
    """Whether the best hit is really close: near enough in meaning, or holding every query word."""
    if best_coverage >= 1.0:
        return True
    return best_cosine is not None and best_cosine >= CLOSE_COSINE[target]


def match_score(cosine: float | None) -> float:
    """A hit's score in 0..1 (shown as match %): its cosine similarity to the query, clipped."""
    if cosine is None or math.isnan(cosine):
        return 0.0
    return min(1.0, max(0.0, float(cosine)))


# What a result shows ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    hit: bool


def _spans(text: str, query: str) -> list[_Span]:
    """Every word of the text with whether it is a (non-stopword) query word, whole words only."""
    wanted = set()
    for word in words(query):
        if word not in STOPWORDS:
            wanted.update((word, stem(word)))
    spans = []
    for match in _WORD_RE.finditer(text):
        word = match.group().casefold().replace("’", "'")
        hit = word not in STOPWORDS and (word in wanted or stem(word) in wanted)
        spans.append(_Span(match.start(), match.end(), hit))
    return spans


def highlight(text: str, query: str) -> list[tuple[str, bool]]:
    """Cut the text into (segment, is a query word) pieces that join back into the text.

    Whole words, case-insensitive, a light stem ("keys" for "key"); stopwords are never marked.
    """
    pieces: list[tuple[str, bool]] = []
    position = 0
    for span in _spans(text, query):
        if not span.hit:
            continue
        if span.start > position:
            pieces.append((text[position : span.start], False))
        pieces.append((text[span.start : span.end], True))
        position = span.end
    if position < len(text):
        pieces.append((text[position:], False))
    return _merged(pieces)


def _merged(pieces: Iterable[tuple[str, bool]]) -> list[tuple[str, bool]]:
    merged: list[tuple[str, bool]] = []
    for segment, hit in pieces:
        if merged and merged[-1][1] == hit and not hit:
            merged[-1] = (merged[-1][0] + segment, hit)
        else:
            merged.append((segment, hit))
    return merged


def snippet(text: str, query: str, width: int = 300) -> str:
    """The stretch of about `width` characters with the most query words (distinct ones first,
    the earliest on a tie), cut at word boundaries, "…" where text was left out. A short text
    comes back whole."""
    text = text.strip()
    if len(text) <= width:
        return text
    spans = _spans(text, query)
    if not spans:
        return text[:width].rstrip() + "…"
    hits = [i for i, span in enumerate(spans) if span.hit]
    first, last, best = 0, 0, (-1, -1)
    for start in hits:
        inside = [i for i in hits if i >= start and spans[i].end - spans[start].start <= width]
        key = (len({stem(text[spans[i].start : spans[i].end].casefold()) for i in inside}), len(inside))
        if key > best:
            first, last, best = start, inside[-1], key
    # Centre the matched stretch, then fill the width with the words around it.
    slack = width - (spans[last].end - spans[first].start)
    begin_at = max(0, spans[first].start - slack // 2)
    start = next(i for i in range(first + 1) if spans[i].start >= begin_at)
    stop = start
    while stop + 1 < len(spans) and spans[stop + 1].end - spans[start].start <= width:
        stop += 1
    while start > 0 and spans[stop].end - spans[start - 1].start <= width:
        start -= 1
    begin = 0 if start == 0 else spans[start].start
    finish = len(text) if stop == len(spans) - 1 else spans[stop].end
    return ("…" if begin > 0 else "") + text[begin:finish] + ("…" if finish < len(text) else "")
