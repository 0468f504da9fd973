"""Quotes, the pure part: find short passages of scrolled-out messages by words and by meaning.

Summaries lose a turn's exact words; a quote brings them back. Every scrolled-out message is a
candidate. It is found two ways at once, and the two ranks are fused (reciprocal rank fusion):
by its words (BM25 over the room's messages, with the room's own term statistics, so a name said
once weighs far more than "said") and by meaning (cosine of the message's vector to the query,
computed by the shell). A message qualifies when it shares a rare word with the query or its
cosine reaches the floor. Each kept message is cut to its best-matching sentence and the
sentences either side, always at sentence boundaries, within `MAX_QUOTE_WORDS`.

No Django, no vectors, no network: the shell (`memory.recall.recaller`) reads the messages,
queries the vectors and lays the result into the Memory section.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from memory.drafts import when_label
from memory.extractive import terms

MAX_QUOTES = 4
MAX_QUOTE_WORDS = 60  # a quote is a sentence and its neighbours, not a transcript
PASSAGE_WORDS = 6  # the meaning route's unit: a sentence, short ones joined to reach this many words
RRF_K = 60  # reciprocal rank fusion's constant (the usual one)
CANDIDATES = 24  # per route, before fusion
REPEAT = 0.8  # the word overlap (Jaccard) at which two passages count as one
NEWEST_FIRST = 0.25  # the weight of an earlier message's words in the query, the newest's being 1
K1 = 1.2
B = 0.75
HEADING = "Quotes from the past (what a character said then may have been a plan, a belief or a lie):"

# Why a quote was chosen, as the host's readout says it.
WORDS = "words"
MEANING = "meaning"
BOTH = "words and meaning"

_END_RE = re.compile(r"[.!?…]+[\"'”’»)\]*_]*(?=\s)|\n")


@dataclass(frozen=True)
class Turn:
    """One scrolled-out message as quotes see it."""

    seq: int
    speaker: str
    text: str
    when: object = None  # a datetime (or None)


@dataclass(frozen=True)
class Quote:
    """One kept passage, with what found it."""

    turn: Turn
    text: str  # the cut passage
    score: float  # the fused score
    bm25: float = 0.0
    cosine: float | None = None
    matched: tuple[str, ...] = ()  # the query's words found in the message
    why: str = WORDS

    @property
    def label(self) -> str:
        return f"Quote · message {self.turn.seq} · {self.turn.speaker or 'someone'}"

    @property
    def line(self) -> str:
        """The quote as the prompt shows it: who said it and when, then the words."""
        when = when_label([self.turn.when]) if self.turn.when is not None else ""
        said = ", ".join(part for part in (self.turn.speaker or "Someone", when) if part)
        return f'[{said}, message {self.turn.seq}] "{self.text}"'


class Lexicon:
    """BM25 statistics over a room's messages: document frequencies and lengths, kept up to date
    block by block (`add` and `remove` take whole messages)."""

    def __init__(self) -> None:
        self.df: Counter[str] = Counter()
        self.docs: dict[int, Counter[str]] = {}
        self.total_length = 0
        self.postings: dict[str, set[int]] = {}

    def add(self, seq: int, text: str) -> None:
        if seq in self.docs:
            self.remove(seq)
        counts = Counter(terms(text))
        self.docs[seq] = counts
        self.total_length += sum(counts.values())
        for term in counts:
            self.df[term] += 1
            self.postings.setdefault(term, set()).add(seq)

    def remove(self, seq: int) -> None:
        counts = self.docs.pop(seq, None)
        if counts is None:
            return
        self.total_length -= sum(counts.values())
        for term in counts:
            self.df[term] -= 1
            if self.df[term] <= 0:
                del self.df[term]
            found = self.postings.get(term)
            if found is not None:
                found.discard(seq)
                if not found:
                    del self.postings[term]

    def idf(self, term: str) -> float:
        n = len(self.docs)
        df = self.df.get(term, 0)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def scores(
        self, query: Mapping[str, float], allowed: Callable[[int], bool]
    ) -> dict[int, tuple[float, tuple[str, ...]]]:
        """BM25 of every allowed message sharing a query term (term -> its weight in the query):
        seq -> (score, matched terms)."""
        n = len(self.docs)
        if not n:
            return {}
        average = self.total_length / n or 1.0
        result: dict[int, list] = {}
        for term, boost in query.items():
            weight = self.idf(term) * boost
            for seq in self.postings.get(term, ()):
                if not allowed(seq):
                    continue
                counts = self.docs[seq]
                tf = counts[term]
                length = sum(counts.values())
                part = weight * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / average))
                entry = result.setdefault(seq, [0.0, []])
                entry[0] += part
                entry[1].append(term)
        return {seq: (score, tuple(found)) for seq, (score, found) in result.items()}


def sentences(text: str) -> list[str]:
    """Split a message into its sentences (and lines), keeping each sentence's own words and marks."""
    parts, start = [], 0
    for match in _END_RE.finditer(text):
        parts.append(text[start : match.end()])
        start = match.end()
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def passages(text: str, least: int = PASSAGE_WORDS) -> list[str]:
    """A message's passages for the meaning route: each sentence on its own, a short one ("Hm.",
    "*nods*") joined to the next until the run has `least` words (the last run to the one before).
    One vector per sentence keeps its meaning from being drowned by the rest of the message: a
    paraphrase of one planted line scores about 0.45 against the line, 0.3 against its message,
    where the chat's filler reaches 0.3 too."""
    found: list[str] = []
    run: list[str] = []
    words = 0
    for part in sentences(text):
        run.append(part)
        words += len(part.split())
        if words >= least:
            found.append(" ".join(run))
            run, words = [], 0
    if run:
        if found:
            found[-1] = f"{found[-1]} {' '.join(run)}"
        else:
            found.append(" ".join(run))
    return found


def cut(
    text: str, query_terms: Iterable[str], idf: Callable[[str], float], limit: int = MAX_QUOTE_WORDS
) -> str:
    """Cut a message to its best-matching sentence and its neighbours, never mid-sentence.

    The best sentence holds the most of the query's terms (by idf); the one before and the one
    after are added while the passage stays within `limit` words (the earlier first: it is
    usually what "it" or "that" refers to). A single sentence longer than the limit is kept whole.
    """
    parts = sentences(text)
    if not parts:
        return ""
    if len(" ".join(parts).split()) <= limit:
        return " ".join(parts)
    wanted = set(query_terms)
    scored = [sum(idf(term) for term in set(terms(part)) & wanted) for part in parts]
    best = max(range(len(parts)), key=lambda index: (scored[index], -index))
    first = last = best
    words = len(parts[best].split())
    for step in (-1, 1, -2, 2):
        index = best + step
        if not 0 <= index < len(parts) or not (index == first - 1 or index == last + 1):
            continue
        size = len(parts[index].split())
        if words + size > limit:
            continue
        words += size
        first, last = min(first, index), max(last, index)
    return " ".join(parts[first : last + 1])


@dataclass
class Found:
    """What `find` decided: the kept quotes (oldest first) and the considered but not kept."""

    kept: list[Quote] = field(default_factory=list)
    rejected: list[Quote] = field(default_factory=list)


def query_terms(texts: Sequence[str], ignore: frozenset[str] = frozenset()) -> dict[str, float]:
    """The query's terms with their weights: the newest message's count fully, earlier ones a quarter
    (as the query's vector leans on the message just sent)."""
    weights: dict[str, float] = {}
    for position, text in enumerate(texts):
        weight = 1.0 if position == len(texts) - 1 else NEWEST_FIRST
        for term in terms(text):
            if term not in ignore:
                weights[term] = max(weights.get(term, 0.0), weight)
    return weights


def find(
    turns: Mapping[int, Turn],
    lexicon: Lexicon,
    *,
    query: Sequence[str],
    cosines: Mapping[int, float],
    floor: float,
    count: int,
    allowed: Callable[[int], bool],
    ignore: frozenset[str] = frozenset(),
    skip: Sequence[tuple[int, int]] = (),
) -> Found:
    """Pick up to `count` quotes for `query` among the allowed messages.

    `query`: the recent messages, newest last; `cosines`: the meaning route's candidates
    (seq -> cosine); `ignore`: words that tell nothing apart (the room's people's names);
    `skip`: message ranges already told word for word.
    """
    found = Found()
    if count <= 0 or not turns:
        return found

    def usable(seq: int) -> bool:
        return seq in turns and allowed(seq) and not any(a <= seq <= b for a, b in skip)

    weights = query_terms(query, ignore)
    lexical = lexicon.scores(weights, usable)
    by_words = sorted(lexical, key=lambda seq: (-lexical[seq][0], -seq))[:CANDIDATES]
    by_meaning = sorted(
        (seq for seq, cosine in cosines.items() if usable(seq) and cosine >= floor),
        key=lambda seq: (-cosines[seq], -seq),
    )[:CANDIDATES]
    fused: dict[int, float] = {}
    for ranked in (by_words, by_meaning):
        for rank, seq in enumerate(ranked):
            fused[seq] = fused.get(seq, 0.0) + 1.0 / (RRF_K + rank + 1)
    wanted = {term for term, weight in weights.items() if weight == 1.0} or set(weights)
    recent = {term for text in query for term in terms(text)}
    told: list[set[str]] = []  # the kept quotes' words
    ranked = sorted(fused, key=lambda seq: (-fused[seq], -seq))
    for seq in ranked:
        turn = turns[seq]
        in_words, in_meaning = seq in lexical, seq in by_meaning
        text = cut(turn.text, wanted, lexicon.idf) if len(found.kept) < count else ""
        words = set(terms(text))
        if words and (words <= recent or any(repeats(words, other) for other in told)):
            text = ""  # the recent messages or a kept quote already say it
        quote = Quote(
            turn=turn,
            text=text,
            score=fused[seq],
            bm25=lexical[seq][0] if in_words else 0.0,
            cosine=cosines.get(seq),
            matched=lexical[seq][1] if in_words else (),
            why=BOTH if in_words and in_meaning else WORDS if in_words else MEANING,
        )
        if text:
            found.kept.append(quote)
            told.append(words)
        else:
            found.rejected.append(quote)
    found.kept.sort(key=lambda quote: quote.turn.seq)
    return found


def repeats(words: set[str], other: set[str]) -> bool:
    """Whether two passages say nearly the same (their content words overlap by `REPEAT` or more):
    a chat's refrains ("the kettle is singing again") would otherwise fill every quote."""
    return len(words & other) >= REPEAT * len(words | other)


def fit(quotes: list[Quote], *, budget: int, count: Callable[[str], int]) -> tuple[list[Quote], list[Quote]]:
    """Keep quotes, best first, while the section (heading included) fits `budget` tokens."""
    kept: list[Quote] = []
    cut_out: list[Quote] = []
    used = count(HEADING) if quotes else 0
    for quote in sorted(quotes, key=lambda q: -q.score):
        tokens = count(quote.line)
        if used + tokens > budget:
            cut_out.append(quote)
            continue
        used += tokens
        kept.append(quote)
    kept.sort(key=lambda quote: quote.turn.seq)
    return kept, cut_out


def quotes_text(quotes: list[Quote]) -> str:
    """The quotes' part of the Memory section: the caveat heading, then one line per quote, oldest first."""
    if not quotes:
        return ""
    return "\n".join([HEADING, *(quote.line for quote in quotes)])
