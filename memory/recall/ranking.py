"""Recall, the pure part: which summaries are in the pool, which qualify, which are kept, and why not.

No Django, no vectors, no network. The shell (`memory.recall.recaller`) reads summaries through a
`fetch` callable, scores them by meaning and reranks; everything that decides lives here.

The pool covers every scrolled-out message once, top-down: a tier-``t`` summary stands for its
stretch when its whole range lies before the live prompt and at least one of its own spans away
from it (so the recent stretch is told by finer summaries); otherwise, or when it is missing or
not witnessed, its children are tried instead.

A reply's recall: qualify the pool (cosine at or above the floor, or a keyword said in the recent
messages — looked up over every tier, a hit inside a roll-up bringing the finer summary); open the
roll-ups closest to the query into the tier-0 summaries inside them (a roll-up finds the stretch,
its tier-0 summaries still hold the facts); the best `candidates` go to the reranker, the best
`keep` are kept within the memory budget and laid out oldest first.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from memory import blocks

ADDED_TIER = 255  # a person's added memory sits outside the tier grid (`Summary.ADDED`)
MIXC = "mixC"
SEMANTIC = "semantic"
CHRONOLOGICAL = "chronological"
OFF = "off"
MODES = (MIXC, SEMANTIC, CHRONOLOGICAL, OFF)

LIVE = "still in the live history"
COVERED = "covered by a higher tier"
FINER = "the recent stretch is told by finer summaries"
FLOOR = "below the score floor"
MODE = "not eligible in this mode"
WITNESS = "not witnessed by this speaker"
RANKED = "ranked below the kept ones"
NARROWED = "opened into the finer summaries inside it"

# How many of the pool's closest (in multiples of the reranker's shortlist) are opened into their
# tier-0 summaries: a roll-up's wording is diluted, so the right stretch is often not in the top 8.
OPEN_FACTOR = 2
# ...and no more than about this many messages' worth of them (16 roll-ups of 128 messages; four of
# 512), so that a very long chat's turn reads a bounded number of rows.
OPEN_MESSAGES = 2048
BUDGET = "over the memory budget"
SENT_ANYWAY = "sent anyway: pinned or yours"

# Why a kept memory is in the prompt.
PINNED = "pinned"
YOURS = "yours"
RECALLED = "recalled"


@dataclass(frozen=True)
class Item:
    """One summary as recall sees it."""

    key: str  # the vector id, "m:<room>:<scope>:<tier>:<block>"
    scope: str
    tier: int
    block: int
    seq_from: int  # None only for a person's memory tied to no messages (never in a pool)
    seq_to: int
    text: str
    keywords: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return place_label(self.tier, self.block, self.seq_from, self.seq_to)


def span_label(seq_from: int | None, seq_to: int | None) -> str:
    """Name the messages a memory covers: "messages 8–15", "message 8" or "the whole story"."""
    if seq_from is None:
        return "the whole story"
    if seq_from == seq_to:
        return f"message {seq_from}"
    return f"messages {seq_from}–{seq_to}"


def place_label(tier: int, block: int, seq_from: int | None, seq_to: int | None) -> str:
    """Name a memory: "Tier 1 · block 3 · messages 96–127", or "Added · the whole story"."""
    if tier == ADDED_TIER:
        return f"Added · {span_label(seq_from, seq_to)}"
    return f"Tier {tier} · block {block} · {span_label(seq_from, seq_to)}"


@dataclass(frozen=True)
class Rejected:
    item: Item
    reason: str
    score: float | None = None


@dataclass(frozen=True)
class Pool:
    members: list[Item]  # oldest first
    rejected: list[Rejected]


@dataclass(frozen=True)
class Scored:
    item: Item
    score: float  # cosine similarity to the query (0 when unknown)
    keyword: str = ""  # the keyword that qualified it, if any
    rerank: float | None = None
    why: str = RECALLED  # PINNED, YOURS or RECALLED


@dataclass
class Choice:
    """What recall decided for one reply (before the text is laid out)."""

    kept: list[Scored] = field(default_factory=list)  # oldest first
    rejected: list[Rejected] = field(default_factory=list)
    shortlist: list[Scored] = field(default_factory=list)  # what went to the reranker, best first


Fetch = Callable[[str, int, int, int], Iterable[Item]]  # (scope, tier, seq_start, seq_end) -> items


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def witnessed_item(item: Item, witnessed: set[int] | None, t: blocks.Tuning) -> bool:
    """Whether the speaker was seated for every tier-0 block the summary covers (None: no filter)."""
    if witnessed is None:
        return True
    first, last = blocks.block_of(item.seq_from, 0, t), blocks.block_of(item.seq_to, 0, t)
    return all(b in witnessed for b in range(first, last + 1))


def build_pool(
    fetch: Fetch,
    *,
    scopes: Iterable[str],
    live_start: int,
    t: blocks.Tuning,
    witnessed: set[int] | None = None,
) -> Pool:
    """Return the compact pool for messages before `live_start`, per scope, oldest first.

    `fetch(scope, tier, start, end)` returns that scope's summaries of `tier` whose block range
    starts in ``[start, end)``; it is called at most once per scope and tier.
    """
    members: list[Item] = []
    rejected: list[Rejected] = []
    for scope in scopes:
        pending = [(0, live_start)] if live_start > 0 else []
        for tier in range(t.max_tier, -1, -1):
            if not pending:
                break
            span = blocks.span(tier, t)
            lo, hi = pending[0][0], pending[-1][1]
            found = {item.block: item for item in fetch(scope, tier, lo - lo % span, hi)}
            descend: list[tuple[int, int]] = []
            for start, end in pending:
                first, last = blocks.block_of(start, tier, t), blocks.block_of(end - 1, tier, t)
                for block in range(first, last + 1):
                    b_start, b_end = blocks.block_range(tier, block, t)
                    item = found.get(block)
                    wanted = (max(b_start, start), min(b_end, end))
                    reason = ""
                    if b_end > live_start:
                        reason = LIVE
                    elif item is None:
                        reason = "missing"
                    elif not witnessed_item(item, witnessed, t):
                        reason = WITNESS
                    elif tier > 0 and b_end > live_start - span:
                        reason = FINER
                    if not reason:
                        members.append(item)
                        continue
                    if item is not None:
                        rejected.append(Rejected(item, reason))
                    if tier > 0 and wanted[0] < wanted[1]:
                        descend.append(wanted)
            pending = _merge(descend)
    members.sort(key=lambda item: (item.seq_from, -item.tier, item.scope))
    return Pool(members, rejected)


def covered(pool: Iterable[Item], others: Iterable[Item]) -> list[Rejected]:
    """Label finer summaries that lie inside a pool member of a higher tier (for the log)."""
    result = []
    members = list(pool)
    for other in others:
        if any(
            m.scope == other.scope and m.tier > other.tier and m.seq_from <= other.seq_from <= m.seq_to
            for m in members
        ):
            result.append(Rejected(other, COVERED))
    return result


def _forms(keyword: str) -> list[str]:
    """The forms a keyword matches as: the whole of it, and for a name of several words its last word
    ("Saint Quillon" is also "Quillon", "Old Harrow" also "Harrow")."""
    word = keyword.strip()
    forms = [word]
    parts = word.split()
    if len(parts) > 1 and word[:1].isupper() and parts[-1][:1].isupper() and len(parts[-1]) >= 3:
        forms.append(parts[-1])
    return forms


_PLAIN = re.compile(r"[\w' -]+")


class Words:
    """A text prepared for whole-word lookups: its words once, for many keywords."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.joined = " " + " ".join(re.findall(r"\w+", text.casefold())) + " "

    def has(self, form: str) -> bool:
        if _PLAIN.fullmatch(form):
            words = re.findall(r"\w+", form.casefold())
            return bool(words) and f" {' '.join(words)} " in self.joined
        return re.search(rf"(?<!\w){re.escape(form)}(?!\w)", self.text, re.IGNORECASE) is not None


def keyword_in(keywords: Iterable[str], text: str | Words, ignore: frozenset[str] = frozenset()) -> str:
    """Return the first keyword found in `text` as a whole word or phrase (any case), or "".

    `ignore` holds casefolded forms never to match on: the names of the people and characters in
    the room, which appear in nearly every summary and every message and so tell nothing apart.
    """
    words = text if isinstance(text, Words) else Words(text)
    for keyword in keywords:
        for form in _forms(keyword):
            if len(form) < 2 or form.casefold() in ignore:
                continue
            if words.has(form):
                return keyword
    return ""


def keyword_hits(pool: list[Item], found: Iterable[tuple[Item, str]]) -> dict[str, list[tuple[Item, str]]]:
    """Match keyword hits to the pool: {pool member key: [(finest summaries hit inside it, keyword)]}.

    `found` holds summaries of any tier whose keyword appears in the recent messages. Hits in
    finer summaries inside a roll-up stand in for that roll-up as candidates: a roll-up cut to its
    length may have dropped the very fact the name points at, the finer summary still has it. A
    hit that contains another hit is left out (the finer one says it more precisely).
    """
    by_scope: dict[str, list[Item]] = {}
    for member in pool:
        by_scope.setdefault(member.scope, []).append(member)
    for members in by_scope.values():
        members.sort(key=lambda m: m.seq_from)
    starts = {scope: [m.seq_from for m in members] for scope, members in by_scope.items()}
    credited: dict[str, dict[str, tuple[Item, str]]] = {}
    for item, keyword in found:
        members = by_scope.get(item.scope)
        if not members:
            continue
        at = bisect.bisect_right(starts[item.scope], item.seq_from) - 1
        if at < 0:
            continue
        member = members[at]
        if member.seq_from <= item.seq_from <= member.seq_to and member.tier >= item.tier:
            credited.setdefault(member.key, {}).setdefault(item.key, (item, keyword))
    result: dict[str, list[tuple[Item, str]]] = {}
    for key, hits in credited.items():
        items = [item for item, _ in hits.values()]
        result[key] = sorted(
            (
                (item, keyword)
                for item, keyword in hits.values()
                if not any(
                    o.tier < item.tier and item.seq_from <= o.seq_from and o.seq_to <= item.seq_to
                    for o in items
                )
            ),
            key=lambda pair: pair[0].seq_from,
        )
    return result


def qualify(
    pool: list[Item],
    similarity: dict[str, float],
    query: str,
    *,
    floor: float,
    keyword_match: bool,
    hits: dict[str, list[tuple[Item, str]]] | None = None,
    ignore: frozenset[str] = frozenset(),
) -> tuple[list[Scored], list[Rejected]]:
    """Split the pool into summaries that qualify (best first) and those below the floor.

    `hits` (from `keyword_hits`) puts the finest summaries holding a keyword in place of the pool
    member covering them. Best first by cosine.
    """
    qualified: list[Scored] = []
    rejected: list[Rejected] = []
    hits = hits or {}
    said = Words(query)
    for item in pool:
        score = similarity.get(item.key, 0.0)
        finer_hits = hits.get(item.key, []) if keyword_match else []
        for finer, keyword in finer_hits:
            qualified.append(Scored(finer, similarity.get(finer.key, score), keyword))
        if any(finer.key == item.key for finer, _ in finer_hits):
            continue
        if finer_hits and score < floor:
            continue  # its keyword hits stand for it; by meaning it does not qualify
        keyword = keyword_in(item.keywords, said, ignore) if keyword_match and not finer_hits else ""
        _judge(item, score, keyword, floor, qualified, rejected)
    qualified.sort(key=_best_first)
    return qualified, rejected


def _judge(
    item: Item, score: float, keyword: str, floor: float, qualified: list[Scored], rejected: list[Rejected]
) -> None:
    """A summary qualifies by meaning (cosine at or above the floor) or by a keyword."""
    if score >= floor or keyword:
        qualified.append(Scored(item, score, keyword))
    else:
        rejected.append(Rejected(item, FLOOR, score))


def _best_first(s: Scored) -> tuple:
    return (-s.score, -s.item.seq_from)


def shortlist(qualified: list[Scored], candidates: int) -> tuple[list[Scored], list[Rejected]]:
    """Take the best `candidates` for the reranker; the rest are ranked out."""
    return qualified[:candidates], [Rejected(s.item, RANKED, s.score) for s in qualified[candidates:]]


def keep_best(
    ranked: list[Scored], keep: int, rerank: list[float] | None = None
) -> tuple[list[Scored], list[Rejected]]:
    """Keep the top `keep`, by rerank score when given (else in the given order), best first."""
    if rerank is not None:
        ranked = [
            Scored(s.item, s.score, s.keyword, r)
            for s, r in sorted(zip(ranked, rerank, strict=True), key=lambda pair: -pair[1])
        ]
    return ranked[:keep], [Rejected(s.item, RANKED, s.score) for s in ranked[keep:]]


def expand(
    front: list[Scored],
    finer: dict[str, list[Item]],
    similarity: dict[str, float],
    query: str,
    *,
    floor: float,
    keyword_match: bool,
    ignore: frozenset[str] = frozenset(),
) -> tuple[list[Scored], list[Rejected]]:
    """Open the best roll-ups into the tier-0 summaries inside them; return the candidates best first.

    The compact pool finds the right stretches among few summaries; the tier-0 summaries inside
    them say what happened there without being cut to a roll-up's length. `finer[key]` holds the
    tier-0 summaries inside roll-up `key` (their cosine in `similarity`); a roll-up with none
    stays itself. A tier-0 summary qualifies as in `qualify`, by the floor or a keyword.
    """
    said = Words(query)
    candidates: list[Scored] = []
    rejected: list[Rejected] = []
    seen: set[str] = set()
    for scored in front:
        inside = finer.get(scored.item.key) if scored.item.tier > 0 else None
        if not inside:
            if scored.item.key not in seen:
                seen.add(scored.item.key)
                candidates.append(scored)
            continue
        rejected.append(Rejected(scored.item, NARROWED, scored.score))
        for item in inside:
            if item.key in seen:
                continue
            seen.add(item.key)
            keyword = keyword_in(item.keywords, said, ignore) if keyword_match else ""
            _judge(item, similarity.get(item.key, 0.0), keyword, floor, candidates, rejected)
    candidates.sort(key=_best_first)
    return candidates, rejected


def fit_budget(
    best_first: list[Scored], *, budget: int, count: Callable[[str], int]
) -> tuple[list[Scored], list[Rejected]]:
    """Keep summaries by rank while their text fits the token budget; lay the kept out oldest first."""
    kept: list[Scored] = []
    rejected: list[Rejected] = []
    used = 0
    for scored in best_first:
        tokens = count(scored.item.text)
        if used + tokens > budget:
            rejected.append(Rejected(scored.item, BUDGET, scored.score))
            continue
        used += tokens
        kept.append(scored)
    kept.sort(key=lambda s: (s.item.seq_from, -s.item.tier))
    return kept, rejected


def chronological(
    pool: list[Item], *, budget: int, count: Callable[[str], int]
) -> tuple[list[Scored], list[Rejected]]:
    """Take the most recent pool members that fit the budget, with no search; lay them out oldest first."""
    kept: list[Scored] = []
    rejected: list[Rejected] = []
    used = 0
    full = False
    for item in sorted(pool, key=lambda i: i.seq_to, reverse=True):
        tokens = count(item.text)
        if full or used + tokens > budget:
            full = True
            rejected.append(Rejected(item, MODE))
            continue
        used += tokens
        kept.append(Scored(item, 0.0))
    kept.sort(key=lambda s: (s.item.seq_from, -s.item.tier))
    return kept, rejected


def always_first(
    always: list[tuple[Item, str]], *, live_start: int, budget: int, count: Callable[[str], int]
) -> tuple[list[Scored], list[Rejected], int]:
    """Fit the memories sent with every reply: `always` pairs each with PINNED or YOURS, in the
    caller's order of preference (newest change first). Pinned go before person-written; each is
    sent whole or not at all. One whose whole stretch is still in the live history is left out.

    Return the kept (laid out: unanchored first, then oldest first), the rejected, and the tokens used.
    """
    kept: list[Scored] = []
    rejected: list[Rejected] = []
    used = 0
    for item, why in sorted(always, key=lambda pair: pair[1] != PINNED):
        if item.seq_from is not None and item.seq_from >= live_start:
            rejected.append(Rejected(item, LIVE))
            continue
        tokens = count(item.text)
        if used + tokens > budget:
            rejected.append(Rejected(item, BUDGET))
            continue
        used += tokens
        kept.append(Scored(item, 0.0, why=why))
    kept.sort(key=lambda s: (s.item.seq_from is not None, s.item.seq_from or 0, -s.item.tier))
    return kept, rejected, used


def without(pool: Pool, keys: set[str]) -> Pool:
    """The pool less the memories already sent anyway (they are not recalled a second time)."""
    if not keys:
        return pool
    return Pool(
        members=[item for item in pool.members if item.key not in keys],
        rejected=[
            *pool.rejected,
            *(Rejected(item, SENT_ANYWAY) for item in pool.members if item.key in keys),
        ],
    )


def choose(
    pool: Pool,
    *,
    mode: str,
    similarity: dict[str, float],
    query: str,
    floor: float,
    keyword_match: bool,
    candidates: int,
    keep: int,
    budget: int,
    count: Callable[[str], int],
    rerank: Callable[[list[Scored]], list[float] | None] | None = None,
    hits: dict[str, list[tuple[Item, str]]] | None = None,
    ignore: frozenset[str] = frozenset(),
    finer: Callable[[list[Scored]], dict[str, list[Item]]] | None = None,
) -> Choice:
    """Run the decision for one reply. `rerank` scores the shortlist (None: use the meaning order);
    `finer` returns the tier-0 summaries inside the given roll-ups (adding their cosine to
    `similarity`): the roll-ups among the pool's `candidates * OPEN_FACTOR` closest by cosine are
    opened into them (see `expand`), whether or not they passed the floor themselves."""
    choice = Choice(rejected=list(pool.rejected))
    if mode == OFF:
        choice.rejected += [Rejected(item, MODE) for item in pool.members]
        return choice
    if mode == CHRONOLOGICAL:
        choice.kept, out = chronological(pool.members, budget=budget, count=count)
        choice.rejected += out
        return choice
    qualified, out = qualify(
        pool.members,
        similarity,
        query,
        floor=floor,
        keyword_match=keyword_match,
        hits=hits,
        ignore=ignore,
    )
    choice.rejected += out
    closest = sorted(pool.members, key=lambda item: -similarity.get(item.key, 0.0))[
        : candidates * OPEN_FACTOR
    ]
    front: list[Scored] = []
    opened_messages = 0
    for item in closest:
        if item.tier > 0 and opened_messages < OPEN_MESSAGES:
            front.append(Scored(item, similarity.get(item.key, 0.0)))
            opened_messages += item.seq_to - item.seq_from + 1
    if finer is not None and front:
        # Opened whether or not they passed the floor: a roll-up's wording is diluted by its length.
        opened, out = expand(
            front, finer(front), similarity, query, floor=floor, keyword_match=keyword_match, ignore=ignore
        )
        gone = {s.item.key for s in front}
        have = {s.item.key for s in opened}
        choice.rejected = [r for r in choice.rejected if r.item.key not in gone]
        qualified = opened + [s for s in qualified if s.item.key not in gone and s.item.key not in have]
        qualified.sort(key=_best_first)
        choice.rejected += out
    if mode == MIXC:
        choice.shortlist, out = shortlist(qualified, candidates)
        choice.rejected += out
        scores = rerank(choice.shortlist) if rerank and choice.shortlist else None
        best, out = keep_best(choice.shortlist, keep, scores)
    else:
        best, out = keep_best(qualified, keep)
    choice.rejected += out
    choice.kept, out = fit_budget(best, budget=budget, count=count)
    choice.rejected += out
    return choice


def memory_text(kept: list[Scored]) -> str:
    """The Memory section's body: the kept summaries' text, oldest first, and nothing else."""
    return "\n\n".join(s.item.text.strip() for s in kept if s.item.text.strip())


def sample(rejected: list[Rejected], size: int = 12) -> list[Rejected]:
    """Pick a sample of the rejected that shows every reason present, best scored first within one."""
    by_reason: dict[str, list[Rejected]] = {}
    for r in rejected:
        by_reason.setdefault(r.reason, []).append(r)
    for group in by_reason.values():
        group.sort(key=lambda r: -(r.score or 0.0))
    picked: list[Rejected] = []
    while len(picked) < size and any(by_reason.values()):
        for group in by_reason.values():
            if group and len(picked) < size:
                picked.append(group.pop(0))
    return picked
