"""Pure helpers of the LoCoMo benchmarks (`python -m bench recall`, `corpus`): no Django, no network.

LoCoMo loading and normalising (turns, dates, observations, QA with evidence ids made sound),
the two metrics (answer containment, evidence coverage), the baselines over plain lists (BM25,
dense ranking, aligned 8-turn chunks, recency), filling a word budget by rank, percentiles and
the printed tables.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orbchat.stopwords import ENGLISH as STOPWORDS

CATEGORIES = ("1", "2", "3", "4", "5")
POOLED = "all_1_4"
KEYS = (POOLED, *CATEGORIES)
CATEGORY_NAMES = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
_SPLIT_RE = re.compile(r"[^a-z0-9]+")
_DIA_RE = re.compile(r"D:?(\d+):(\d+)")


# LoCoMo --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str  # normalised "D<session>:<turn>"
    session: int
    speaker: str
    text: str  # with "[shares image: caption]" for image turns
    when: dt.datetime


@dataclass(frozen=True)
class Question:
    question: str
    answer: str  # `adversarial_answer` for category 5
    category: str  # "1".."5"
    evidence: tuple[str, ...]  # normalised dia ids that exist in the conversation


@dataclass
class Conversation:
    sample_id: str
    speaker_a: str  # the human
    speaker_b: str  # the character
    turns: list[Turn]
    questions: list[Question]
    facts: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # (fact, dia ids), in order
    session_dates: dict[int, dt.datetime] = field(default_factory=dict)


def dia_key(raw: str) -> str | None:
    """Return "D<s>:<t>" (leading zeros and stray colons dropped) or None if it is no dia id."""
    match = _DIA_RE.fullmatch(raw.strip()) if isinstance(raw, str) else None
    return f"D{int(match[1])}:{int(match[2])}" if match else None


def normalise_evidence(raw: Iterable[object], known: set[str] | frozenset[str]) -> tuple[str, ...]:
    """Split joined ids ("D8:6; D9:17", "D1:2 D1:3"), repair "D:11:26" and "D30:05", drop the
    malformed ("D") and the dangling (ids of no turn); keep the first-seen order, no repeats."""
    found: list[str] = []
    for item in raw or ():
        if not isinstance(item, str):
            continue
        for match in _DIA_RE.finditer(item):
            key = f"D{int(match[1])}:{int(match[2])}"
            if key in known and key not in found:
                found.append(key)
    return tuple(found)


def parse_when(text: str) -> dt.datetime:
    """Read a session date like "1:56 pm on 8 May, 2023" (UTC)."""
    cleaned = re.sub(r"\s+", " ", text.strip())
    for form in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %d %B %Y"):
        try:
            return dt.datetime.strptime(cleaned, form).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
    raise ValueError(f"unreadable session date {text!r}")


def image_text(turn: dict) -> str:
    text = str(turn.get("text") or "").strip()
    caption = str(turn.get("blip_caption") or "").strip()
    return f"{text} [shares image: {caption}]".strip() if caption else text


def conversation_from(sample: dict) -> Conversation:
    """One LoCoMo sample as a Conversation; sessions are the `session_N` lists (not the date keys)."""
    convo = sample["conversation"]
    numbers = sorted(
        int(key.split("_")[1])
        for key, value in convo.items()
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list) and value
    )
    turns: list[Turn] = []
    dates: dict[int, dt.datetime] = {}
    for number in numbers:
        start = parse_when(convo[f"session_{number}_date_time"])
        dates[number] = start
        for position, raw in enumerate(convo[f"session_{number}"]):
            key = dia_key(raw.get("dia_id", "")) or f"D{number}:{position + 1}"
            turns.append(
                Turn(
                    dia_id=key,
                    session=number,
                    speaker=str(raw.get("speaker") or ""),
                    text=image_text(raw),
                    when=start + dt.timedelta(minutes=position),
                )
            )
    known = {turn.dia_id for turn in turns}
    questions = []
    for qa in sample.get("qa", []):
        category = str(qa.get("category"))
        answer = qa.get("adversarial_answer") if category == "5" else qa.get("answer")
        if answer is None:
            answer = qa.get("answer") if qa.get("answer") is not None else qa.get("adversarial_answer")
        questions.append(
            Question(
                question=str(qa.get("question") or ""),
                answer="" if answer is None else str(answer),
                category=category,
                evidence=normalise_evidence(qa.get("evidence") or [], known),
            )
        )
    facts: list[tuple[str, tuple[str, ...]]] = []
    observation = sample.get("observation") or {}
    for number in numbers:
        per_speaker = observation.get(f"session_{number}_observation") or {}
        for entries in per_speaker.values():
            for entry in entries:
                if not isinstance(entry, list | tuple) or len(entry) < 2:
                    continue
                ids = entry[1] if isinstance(entry[1], list) else [entry[1]]
                keys = tuple(k for k in (dia_key(str(i)) for i in ids) if k in known)
                if keys and str(entry[0]).strip():
                    facts.append((str(entry[0]).strip(), keys))
    order = {turn.dia_id: index for index, turn in enumerate(turns)}
    facts.sort(key=lambda fact: order[fact[1][0]])
    return Conversation(
        sample_id=str(sample.get("sample_id") or ""),
        speaker_a=str(convo.get("speaker_a") or ""),
        speaker_b=str(convo.get("speaker_b") or ""),
        turns=turns,
        questions=questions,
        facts=facts,
        session_dates=dates,
    )


def load_locomo(path: str | Path) -> list[Conversation]:
    return [conversation_from(sample) for sample in json.loads(Path(path).read_text())]


def turn_line(turn: Turn) -> str:
    """A turn as the baselines index and return it: "Speaker: text"."""
    return f"{turn.speaker}: {turn.text}"


# Metrics ---------------------------------------------------------------------------------------


def content_words(text: str) -> list[str]:
    """Lowercase, split on non-alphanumerics, drop stopwords and empties."""
    return [word for word in _SPLIT_RE.split(str(text).lower()) if word and word not in STOPWORDS]


def containment(answer: str, recalled: str) -> float | None:
    """Share of the answer's distinct content words present in the recalled text (None: no words)."""
    wanted = set(content_words(answer))
    if not wanted:
        return None
    have = set(content_words(recalled))
    return len(wanted & have) / len(wanted)


def evidence_coverage(evidence: Sequence[int], ranges: Iterable[tuple[int, int]]) -> float | None:
    """Share of evidence seqs inside any [seq_from, seq_to] range (None: no evidence)."""
    if not evidence:
        return None
    spans = list(ranges)
    inside = sum(1 for seq in evidence if any(lo <= seq <= hi for lo, hi in spans))
    return inside / len(evidence)


def set_coverage(evidence: Sequence[int], returned: set[int]) -> float | None:
    """Share of evidence seqs among the returned turns (None: no evidence)."""
    if not evidence:
        return None
    return sum(1 for seq in evidence if seq in returned) / len(evidence)


def word_count(text: str) -> int:
    return len(text.split())


# Word budget -------------------------------------------------------------------------------------

Segment = tuple[int, str]  # (turn seq, text)


def fill_budget(ranked: Sequence[Sequence[Segment]], budget: int) -> tuple[str, set[int], int]:
    """Take items best first while they fit `budget` words; cut the first that overflows to fit
    exactly, then stop. Return the text, the seqs of turns with at least one word taken, and the
    words taken."""
    parts: list[str] = []
    seqs: set[int] = set()
    used = 0
    for item in ranked:
        if used >= budget:
            break
        for seq, text in item:
            words = text.split()
            if not words:
                continue
            room = budget - used
            if room <= 0:
                break
            taken = words[:room]
            parts.append(" ".join(taken))
            seqs.add(seq)
            used += len(taken)
    return "\n".join(parts), seqs, used


# Baselines ------------------------------------------------------------------------------------


class BM25:
    """Okapi BM25 over token lists (k1=1.2, b=0.75), IDF over the documents themselves."""

    def __init__(self, documents: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(content_words(d)) for d in documents]
        self.lengths = [sum(c.values()) for c in self.docs]
        self.avg = (sum(self.lengths) / len(self.docs)) if self.docs else 1.0
        frequency: Counter[str] = Counter()
        for doc in self.docs:
            frequency.update(doc.keys())
        n = len(self.docs)
        self.idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in frequency.items()}

    def scores(self, query: str) -> list[float]:
        terms = set(content_words(query))
        result = []
        for doc, length in zip(self.docs, self.lengths, strict=True):
            score = 0.0
            for term in terms:
                tf = doc.get(term)
                if tf:
                    norm = self.k1 * (1 - self.b + self.b * length / (self.avg or 1.0))
                    score += self.idf[term] * tf * (self.k1 + 1) / (tf + norm)
            result.append(score)
        return result

    def rank(self, query: str) -> list[int]:
        scores = self.scores(query)
        return sorted(range(len(scores)), key=lambda i: (-scores[i], -i))


def rank_by(scores: Sequence[float]) -> list[int]:
    """Indices best first (ties: the later item first)."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], -i))


def aligned_chunks(seqs: Sequence[int], size: int = 8) -> list[list[int]]:
    """Group seqs into chunks aligned like tier-0 blocks: [k*size, (k+1)*size)."""
    chunks: dict[int, list[int]] = {}
    for seq in seqs:
        chunks.setdefault(seq // size, []).append(seq)
    return [chunks[key] for key in sorted(chunks)]


def recency_order(seqs: Sequence[int]) -> list[int]:
    """Newest first."""
    return sorted(seqs, reverse=True)


# Reporting -----------------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile with linear interpolation (numpy's default); 0.0 for no values."""
    data = sorted(values)
    if not data:
        return 0.0
    if len(data) == 1:
        return float(data[0])
    rank = (len(data) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(data) - 1)
    return float(data[low] + (data[high] - data[low]) * (rank - low))


def mean(values: Iterable[float]) -> float:
    data = list(values)
    return sum(data) / len(data) if data else 0.0


def by_category(scores: Iterable[tuple[str, float | None]]) -> dict[str, float | None]:
    """Mean per category key and pooled over 1–4; None where no question had a score."""
    groups: dict[str, list[float]] = {key: [] for key in KEYS}
    for category, score in scores:
        if score is None or category not in groups:
            continue
        groups[category].append(score)
        if category in ("1", "2", "3", "4"):
            groups[POOLED].append(score)
    return {key: (round(mean(values), 4) if values else None) for key, values in groups.items()}


def format_table(systems: dict[str, dict]) -> str:
    """Systems × metrics as aligned plain text."""
    header = [
        "system",
        "cont all",
        *(f"c{k}" for k in CATEGORIES),
        "evid all",
        *(f"e{k}" for k in CATEGORIES),
        "words",
        "w p95",
        "ms p50",
        "ms p95",
    ]

    def num(value: float | None, digits: int = 3) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    rows = [header]
    for name, r in systems.items():
        ac, ev = r["answer_containment"], r["evidence_coverage"]
        rows.append(
            [
                name,
                num(ac.get(POOLED)),
                *(num(ac.get(k)) for k in CATEGORIES),
                num(ev.get(POOLED)),
                *(num(ev.get(k)) for k in CATEGORIES),
                num(r["words_mean"], 1),
                num(r["words_p95"], 1),
                num(r["latency_ms"]["p50"], 1),
                num(r["latency_ms"]["p95"], 1),
            ]
        )
    return aligned(rows)


def aligned(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells as plain text: the first column to the left, the others to the right, a rule
    under the first row (the header)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells))
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
