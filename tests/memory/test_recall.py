"""Recall, the pure part: the pool, qualifying, choosing and the log sample. No Django, no database."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from memory import blocks
from memory.recall import ranking as recall

T = blocks.Tuning()
B = T.block_size


def key(scope: str, tier: int, block: int) -> str:
    return f"m:1:{scope}:{tier}:{block}"


def summary(
    scope: str,
    tier: int,
    block: int,
    n: int = 10**9,
    *,
    text: str | None = None,
    keywords: tuple[str, ...] = (),
) -> recall.Item:
    """The complete summary of one block in a chat of `n` messages."""
    start, end = blocks.block_range(tier, block, T)
    return recall.Item(
        key(scope, tier, block),
        scope,
        tier,
        block,
        start,
        min(end, n) - 1,
        text if text is not None else f"{scope} tier {tier} block {block}",
        keywords,
    )


class Store:
    """Complete summaries at tiers 0..max_tier for `n` messages per scope, built lazily; counts fetches."""

    def __init__(self, n: int, scopes: tuple[str, ...] = ("shared",)):
        self.n = n
        self.scopes = set(scopes)
        self.missing: set[tuple[str, int, int]] = set()
        self.calls: list[tuple[str, int, int, int]] = []

    def delete(self, scope: str, tier: int, block: int) -> None:
        self.missing.add((scope, tier, block))

    def fetch(self, scope: str, tier: int, start: int, end: int) -> list[recall.Item]:
        self.calls.append((scope, tier, start, end))
        if scope not in self.scopes:
            return []
        size = blocks.span(tier, T)
        first, past = -(-start // size), -(-end // size)  # blocks whose start lies in [start, end)
        return [
            summary(scope, tier, b, self.n)
            for b in range(max(first, 0), past)
            if b * size < self.n and (scope, tier, b) not in self.missing
        ]


def pool_for(store: Store, live_start: int, scopes=("shared",), witnessed=None) -> recall.Pool:
    return recall.build_pool(
        store.fetch, scopes=list(scopes), live_start=live_start, t=T, witnessed=witnessed
    )


def coverage(members: list[recall.Item], scope: str | None = None) -> Counter:
    """How many pool members cover each seq."""
    counts: Counter = Counter()
    for item in members:
        if scope is None or item.scope == scope:
            counts.update(range(item.seq_from, item.seq_to + 1))
    return counts


def before_live(live_start: int, n: int) -> set[int]:
    """Seqs in tier-0 blocks lying wholly before the live history (the ones a pool can tell)."""
    return set(range(min(live_start // B * B, n)))


def end_of(item: recall.Item) -> int:
    return blocks.block_range(item.tier, item.block, T)[1]


def reasons(pool_or_rejected, reason: str) -> set[tuple[str, int, int]]:
    rejected = pool_or_rejected.rejected if isinstance(pool_or_rejected, recall.Pool) else pool_or_rejected
    return {(r.item.scope, r.item.tier, r.item.block) for r in rejected if r.reason == reason}


def ids(items) -> list[tuple[str, int, int]]:
    return [(i.scope, i.tier, i.block) for i in items]


# build_pool: cover


@pytest.mark.parametrize("live_start", [0, 8, 100, 1000, 5000])
def test_pool_covers_every_scrolled_out_message_exactly_once(live_start):
    """Each seq in a block wholly before the live history is covered by exactly one pool member."""
    pool = pool_for(Store(6000), live_start)
    counts = coverage(pool.members)
    assert set(counts) == before_live(live_start, 6000)
    assert set(counts.values()) <= {1}


def test_pool_is_empty_when_nothing_has_scrolled_out():
    """With live_start 0 there is nothing to remember."""
    store = Store(6000)
    pool = pool_for(store, 0)
    assert pool.members == []
    assert pool.rejected == []


def test_pool_members_are_listed_oldest_first():
    """Members come sorted by the first message they cover."""
    pool = pool_for(Store(6000), 5000)
    starts = [m.seq_from for m in pool.members]
    assert starts == sorted(starts)


@pytest.mark.parametrize("live_start", [8, 100, 1000, 5000, 5003])
def test_no_member_reaches_into_the_live_history(live_start):
    """Every member's block ends at or before live_start."""
    pool = pool_for(Store(6000), live_start)
    assert pool.members
    for item in pool.members:
        assert end_of(item) <= live_start
        assert item.seq_to < live_start


@pytest.mark.parametrize("live_start", [8, 100, 1000, 5000, 5003])
def test_summaries_overlapping_the_live_history_are_rejected_as_live(live_start):
    """At each tier the block holding live_start-1 is rejected with LIVE when its range runs past it."""
    pool = pool_for(Store(6000), live_start)
    live = reasons(pool, recall.LIVE)
    expected = set()
    for tier in range(T.max_tier + 1):
        block = blocks.block_of(live_start - 1, tier, T)
        if blocks.block_range(tier, block, T)[1] > live_start:
            expected.add(("shared", tier, block))
    assert live == expected
    for r in pool.rejected:
        if r.reason == recall.LIVE:
            start, end = blocks.block_range(r.item.tier, r.item.block, T)
            assert start < live_start < end


def test_partly_scrolled_out_tier0_block_is_live_and_leaves_its_head_uncovered():
    """With live_start 100 the tier-0 summary of 96-103 is LIVE, so 96-99 are not in the pool."""
    pool = pool_for(Store(6000), 100)
    assert recall.Rejected(summary("shared", 0, 12, 6000), recall.LIVE) in pool.rejected
    counts = coverage(pool.members)
    assert not any(seq in counts for seq in range(96, 100))
    assert all(counts[seq] == 1 for seq in range(96))


# build_pool: roll-ups far back, finer summaries near the live history


def test_distant_history_is_told_by_the_highest_roll_up():
    """With live_start 5000 the oldest member is the tier-3 summary of messages 0-511."""
    pool = pool_for(Store(6000), 5000)
    assert pool.members[0] == summary("shared", 3, 0, 6000)
    assert (pool.members[0].seq_from, pool.members[0].seq_to) == (0, 511)


def test_pool_shape_near_the_live_history_gets_finer():
    """With live_start 5000: tier 3 to 4096, tier 2 to 4864, tier 1 to 4960, tier 0 up to 5000."""
    pool = pool_for(Store(6000), 5000)
    by_tier = {tier: [m.block for m in pool.members if m.tier == tier] for tier in range(4)}
    assert by_tier == {
        3: list(range(0, 8)),
        2: list(range(32, 38)),
        1: list(range(152, 155)),
        0: list(range(620, 625)),
    }


@pytest.mark.parametrize("live_start", [100, 1000, 4999, 5000, 5003])
def test_roll_up_members_end_at_least_one_of_their_spans_before_live(live_start):
    """A tier-t member (t > 0) ends at or before live_start - span(t)."""
    pool = pool_for(Store(6000), live_start)
    for item in pool.members:
        if item.tier > 0:
            assert end_of(item) <= live_start - blocks.span(item.tier, T)


def test_roll_ups_too_close_to_live_are_rejected_as_finer():
    """With live_start 5000 the tier-3, tier-2 and tier-1 blocks just before it are rejected with FINER."""
    pool = pool_for(Store(6000), 5000)
    assert reasons(pool, recall.FINER) == {("shared", 3, 8), ("shared", 2, 38), ("shared", 1, 155)}
    for r in pool.rejected:
        if r.reason == recall.FINER:
            end = end_of(r.item)
            assert live_start_minus_span(5000, r.item.tier) < end <= 5000


def live_start_minus_span(live_start: int, tier: int) -> int:
    return live_start - blocks.span(tier, T)


def test_tier0_members_may_end_exactly_at_live():
    """The newest tier-0 member ends right where the live history starts."""
    pool = pool_for(Store(6000), 5000)
    last = pool.members[-1]
    assert (last.tier, last.block) == (0, 624)
    assert end_of(last) == 5000


# build_pool: missing summaries


def test_missing_tier2_roll_up_is_replaced_by_its_children():
    """Delete tier-2 block 33 (4224-4351): its four tier-1 children take its place, still covering once."""
    store = Store(6000)
    store.delete("shared", 2, 33)
    pool = pool_for(store, 5000)
    assert ("shared", 2, 33) not in ids(pool.members)
    for child in range(132, 136):
        assert summary("shared", 1, child, 6000) in pool.members
    counts = coverage(pool.members)
    assert set(counts) == before_live(5000, 6000)
    assert set(counts.values()) == {1}


def test_missing_tier3_roll_up_is_replaced_by_tier2_children():
    """Delete tier-3 block 0: the tier-2 summaries of 0-511 stand in for it."""
    store = Store(6000)
    store.delete("shared", 3, 0)
    pool = pool_for(store, 5000)
    assert [m for m in pool.members if m.seq_to < 512] == [summary("shared", 2, b, 6000) for b in range(4)]
    counts = coverage(pool.members)
    assert set(counts) == before_live(5000, 6000)
    assert set(counts.values()) == {1}


def test_missing_tier0_summary_leaves_a_gap():
    """A tier-0 summary missing with no roll-up over it leaves its messages uncovered, the rest once."""
    store = Store(6000)
    store.delete("shared", 0, 620)  # 4960-4967, told at tier 0 when live_start is 5000
    pool = pool_for(store, 5000)
    counts = coverage(pool.members)
    assert set(counts) == before_live(5000, 6000) - set(range(4960, 4968))
    assert set(counts.values()) == {1}


def test_missing_summaries_on_every_tier_leave_only_that_gap():
    """With tiers 3, 2 and 1 over block 0 missing and tier-0 block 1 missing, only 8-15 is uncovered."""
    store = Store(6000)
    for tier, block in [(3, 0), (2, 0), (1, 0), (0, 1)]:
        store.delete("shared", tier, block)
    pool = pool_for(store, 5000)
    counts = coverage(pool.members)
    assert set(counts) == before_live(5000, 6000) - set(range(8, 16))
    assert set(counts.values()) == {1}
    assert summary("shared", 0, 0, 6000) in pool.members
    assert summary("shared", 1, 1, 6000) in pool.members


def test_empty_store_gives_an_empty_pool():
    """No summaries at all: no members, no crash."""
    pool = pool_for(Store(0), 5000)
    assert pool.members == []


# build_pool: fetching


def test_fetch_is_called_at_most_once_per_scope_and_tier():
    """Even with gaps that split the pending ranges, each (scope, tier) is fetched at most once."""
    store = Store(6000, scopes=("shared", "seat-5"))
    for block in (1, 3, 5):
        store.delete("shared", 3, block)
        store.delete("shared", 2, block * 4 + 1)
    pool = pool_for(store, 5000, scopes=("shared", "seat-5"))
    assert pool.members
    counts = Counter((scope, tier) for scope, tier, _, _ in store.calls)
    assert counts
    assert set(counts.values()) == {1}
    assert {scope for scope, _ in counts} == {"shared", "seat-5"}


def test_pool_stays_small_for_a_long_chat():
    """A 100,000-message chat with live_start 99,990 gives fewer than 250 members, quickly."""
    store = Store(100_000)
    began = time.perf_counter()
    pool = pool_for(store, 99_990)
    elapsed = time.perf_counter() - began
    assert len(pool.members) < 250
    assert elapsed < 1.0
    counts = coverage(pool.members)
    assert set(counts) == before_live(99_990, 100_000)
    assert set(counts.values()) == {1}


# build_pool: scopes


def test_each_scope_gets_its_own_cover():
    """ "shared" and "seat-5" are covered independently; a gap in one does not change the other."""
    store = Store(6000, scopes=("shared", "seat-5"))
    store.delete("seat-5", 3, 0)
    pool = pool_for(store, 5000, scopes=("shared", "seat-5"))
    for scope in ("shared", "seat-5"):
        counts = coverage(pool.members, scope)
        assert set(counts) == before_live(5000, 6000)
        assert set(counts.values()) == {1}
    assert summary("shared", 3, 0, 6000) in pool.members
    assert summary("seat-5", 3, 0, 6000) not in pool.members
    assert [summary("seat-5", 2, b, 6000) for b in range(4)] == [
        m for m in pool.members if m.scope == "seat-5" and m.seq_to < 512
    ]


# build_pool: witnessed


def witnessed_all_but(live_start: int, *unwitnessed: int) -> set[int]:
    return set(range(live_start // B + 1)) - set(unwitnessed)


def test_unwitnessed_roll_ups_are_rejected_and_their_witnessed_children_used():
    """Tier-0 block 3 unwitnessed: the roll-ups over it get WITNESS, its siblings 0-2 stand in."""
    pool = pool_for(Store(6000), 5000, witnessed=witnessed_all_but(5000, 3))
    assert {("shared", 3, 0), ("shared", 2, 0), ("shared", 1, 0), ("shared", 0, 3)} <= reasons(
        pool, recall.WITNESS
    )
    for block in range(3):
        assert summary("shared", 0, block, 6000) in pool.members
    for tier, block in [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)]:
        assert summary("shared", tier, block, 6000) in pool.members


def test_nothing_in_the_pool_covers_an_unwitnessed_block():
    """With tier-0 blocks 3, 100 and 600 unwitnessed, only they are missing from an otherwise single cover."""
    unwitnessed = (3, 100, 600)
    pool = pool_for(Store(6000), 5000, witnessed=witnessed_all_but(5000, *unwitnessed))
    hidden = {seq for b in unwitnessed for seq in range(b * B, (b + 1) * B)}
    counts = coverage(pool.members)
    assert set(counts) == before_live(5000, 6000) - hidden
    assert set(counts.values()) == {1}
    for item in pool.members:
        first, last = blocks.block_of(item.seq_from, 0, T), blocks.block_of(item.seq_to, 0, T)
        assert not set(range(first, last + 1)) & set(unwitnessed)


def test_every_summary_over_an_unwitnessed_block_is_rejected_for_witness():
    """Each WITNESS rejection covers at least one unwitnessed tier-0 block."""
    unwitnessed = {3, 100}
    pool = pool_for(Store(6000), 5000, witnessed=witnessed_all_but(5000, *unwitnessed))
    witness = [r.item for r in pool.rejected if r.reason == recall.WITNESS]
    assert witness
    for item in witness:
        first, last = blocks.block_of(item.seq_from, 0, T), blocks.block_of(item.seq_to, 0, T)
        assert set(range(first, last + 1)) & unwitnessed


def test_witnessed_none_applies_no_filter():
    """witnessed=None gives the same pool as no witness filter at all."""
    assert pool_for(Store(6000), 5000, witnessed=None) == pool_for(Store(6000), 5000)
    assert not reasons(pool_for(Store(6000), 5000), recall.WITNESS)


# keyword_in


@pytest.mark.parametrize("text", ["the key.", "The KEY is here", "key", "(key)"])
def test_keyword_matches_whole_word_in_any_case(text):
    """ "Key" is found as a whole word whatever its case."""
    assert recall.keyword_in(["Key"], text) == "Key"


@pytest.mark.parametrize("text", ["the keyhole", "a monkey", "keys", "turnkey deal"])
def test_keyword_does_not_match_inside_a_word(text):
    """ "Key" is not found inside another word."""
    assert recall.keyword_in(["Key"], text) == ""


def test_multi_word_keyword_matches_as_a_phrase():
    """ "brass key" matches the phrase in any case."""
    assert recall.keyword_in(["brass key"], "Where is the Brass Key now?") == "brass key"
    assert recall.keyword_in(["brass key"], "the brass door key") == ""


def test_one_letter_keywords_are_ignored():
    """A one-letter keyword never matches, even standing alone."""
    assert recall.keyword_in(["a", "I", " x "], "a cat and I saw x") == ""


def test_first_matching_keyword_is_returned():
    """With several keywords the first one present is returned."""
    assert recall.keyword_in(["lamp", "ferry", "tide"], "the tide and the ferry") == "ferry"


@pytest.mark.parametrize("keyword", ["C++", "a.b", "(x", "[key]", "what?", "a|b", "\\d+"])
def test_regex_special_characters_in_keywords_are_literal(keyword):
    """Keywords with regex metacharacters neither crash nor act as patterns."""
    assert recall.keyword_in([keyword], f"we talked about {keyword} today") == keyword
    assert recall.keyword_in([keyword], "axb ab 123 x") == ""


def test_cpp_keyword_matches_but_not_c_alone():
    """ "C++" matches "I write C++ daily" and not "C is older"."""
    assert recall.keyword_in(["C++"], "I write C++ daily") == "C++"
    assert recall.keyword_in(["C++"], "C is older") == ""


# qualify


def scored_pool() -> list[recall.Item]:
    return [summary("shared", 0, b, text=f"text {b}", keywords=(f"word{b}",)) for b in range(4)]


def test_cosine_at_or_above_floor_qualifies():
    """A score equal to the floor qualifies; one above it does too."""
    items = scored_pool()[:2]
    similarity = {items[0].key: 0.5, items[1].key: 0.7}
    qualified, rejected = recall.qualify(items, similarity, "nothing", floor=0.5, keyword_match=True)
    assert [s.item for s in qualified] == [items[1], items[0]]
    assert rejected == []


def test_keyword_in_query_qualifies_below_floor():
    """Below the floor, a keyword of the summary in the query qualifies it and is recorded."""
    item = scored_pool()[2]
    qualified, rejected = recall.qualify(
        [item], {item.key: 0.1}, "what about WORD2 then", floor=0.5, keyword_match=True
    )
    assert qualified == [recall.Scored(item, 0.1, "word2")]
    assert rejected == []


def test_below_floor_without_keyword_is_rejected_with_its_score():
    """Below the floor with no keyword in the query: Rejected with FLOOR and the score."""
    item = scored_pool()[0]
    qualified, rejected = recall.qualify([item], {item.key: 0.2}, "unrelated", floor=0.5, keyword_match=True)
    assert qualified == []
    assert rejected == [recall.Rejected(item, recall.FLOOR, 0.2)]


def test_unknown_similarity_counts_as_zero():
    """A summary missing from the similarity map scores 0 and falls below a positive floor."""
    item = scored_pool()[0]
    _, rejected = recall.qualify([item], {}, "unrelated", floor=0.1, keyword_match=True)
    assert rejected == [recall.Rejected(item, recall.FLOOR, 0.0)]


def test_keyword_match_off_disables_the_keyword_route():
    """With keyword_match=False a keyword in the query does not rescue a low score."""
    item = scored_pool()[1]
    qualified, rejected = recall.qualify([item], {item.key: 0.1}, "word1", floor=0.5, keyword_match=False)
    assert qualified == []
    assert rejected == [recall.Rejected(item, recall.FLOOR, 0.1)]


def test_qualified_are_sorted_best_score_first():
    """Qualified summaries come best score first, whatever the pool order."""
    items = scored_pool()
    similarity = {items[0].key: 0.6, items[1].key: 0.9, items[2].key: 0.1, items[3].key: 0.75}
    qualified, rejected = recall.qualify(items, similarity, "word2", floor=0.5, keyword_match=True)
    assert [s.score for s in qualified] == [0.9, 0.75, 0.6, 0.1]
    assert [s.item.block for s in qualified] == [1, 3, 0, 2]
    assert rejected == []


# choose


def tokens(text: str) -> int:
    return len(text.split())


def chat_pool(count: int = 6) -> recall.Pool:
    """A pool of `count` tier-0 summaries of 5 words each, plus one LIVE rejection carried along."""
    members = [summary("shared", 0, b, text=f"summary of block number {b}") for b in range(count)]
    live = recall.Rejected(summary("shared", 0, count), recall.LIVE)
    return recall.Pool(members, [live])


class Rerank:
    """A reranker that records what it was asked and returns given scores."""

    def __init__(self, scores=None, *, by_block: dict[int, float] | None = None):
        self.scores = scores
        self.by_block = by_block
        self.calls: list[list[recall.Scored]] = []

    def __call__(self, shortlist):
        self.calls.append(list(shortlist))
        if self.by_block is not None:
            return [self.by_block[s.item.block] for s in shortlist]
        return self.scores


def run_choose(pool: recall.Pool, mode: str, similarity: dict[int, float] | None = None, **options):
    """choose() with roomy defaults; `similarity` maps block numbers to cosine."""
    similarity = similarity or {}
    settings = {
        "query": "",
        "floor": 0.5,
        "keyword_match": True,
        "candidates": 10,
        "keep": 10,
        "budget": 1000,
        "count": tokens,
        "rerank": None,
    }
    settings.update(options)
    return recall.choose(
        pool,
        mode=mode,
        similarity={key("shared", 0, b): s for b, s in similarity.items()},
        **settings,
    )


def blocks_of(items) -> list[int]:
    return [getattr(i, "item", i).block for i in items]


def test_mode_off_keeps_nothing():
    """OFF rejects every pool member with MODE and keeps none, without reranking."""
    pool = chat_pool()
    rerank = Rerank([1.0])
    choice = run_choose(pool, recall.OFF, dict.fromkeys(range(6), 0.9), rerank=rerank)
    assert choice.kept == []
    assert [r for r in choice.rejected if r.reason == recall.MODE] == [
        recall.Rejected(m, recall.MODE) for m in pool.members
    ]
    assert rerank.calls == []


def test_pool_rejections_are_carried_into_the_choice():
    """The pool's own rejections (LIVE here) appear in the choice's rejected list."""
    pool = chat_pool()
    for mode in recall.MODES:
        choice = run_choose(pool, mode, dict.fromkeys(range(6), 0.9))
        assert pool.rejected[0] in choice.rejected


def test_chronological_keeps_the_most_recent_that_fit_oldest_first():
    """CHRONOLOGICAL with room for three keeps the newest three, oldest first; the rest get MODE."""
    pool = chat_pool()
    rerank = Rerank([1.0])
    choice = run_choose(pool, recall.CHRONOLOGICAL, budget=15, rerank=rerank)
    assert blocks_of(choice.kept) == [3, 4, 5]
    assert reasons(choice.rejected, recall.MODE) == {("shared", 0, b) for b in range(3)}
    assert rerank.calls == []


def test_chronological_ignores_the_score_floor():
    """CHRONOLOGICAL keeps recent summaries even with no similarity at all."""
    choice = run_choose(chat_pool(3), recall.CHRONOLOGICAL, {}, budget=1000)
    assert blocks_of(choice.kept) == [0, 1, 2]


def test_semantic_keeps_top_by_cosine_without_reranking():
    """SEMANTIC keeps the `keep` best by cosine, oldest first, and never calls rerank."""
    rerank = Rerank([0.0, 0.0])
    similarity = {0: 0.6, 1: 0.95, 2: 0.55, 3: 0.9, 4: 0.7, 5: 0.1}
    choice = run_choose(chat_pool(), recall.SEMANTIC, similarity, keep=2, rerank=rerank)
    assert rerank.calls == []
    assert blocks_of(choice.kept) == [1, 3]
    assert reasons(choice.rejected, recall.RANKED) == {("shared", 0, b) for b in (0, 2, 4)}
    assert reasons(choice.rejected, recall.FLOOR) == {("shared", 0, 5)}


def test_mixc_sends_at_most_candidates_to_rerank():
    """MIXC sends the best `candidates` to rerank, best first; qualified ones beyond that are RANKED."""
    rerank = Rerank(by_block={1: 0.1, 3: 0.2, 4: 0.3})
    similarity = {0: 0.6, 1: 0.95, 2: 0.55, 3: 0.9, 4: 0.7, 5: 0.1}
    choice = run_choose(chat_pool(), recall.MIXC, similarity, candidates=3, keep=3, rerank=rerank)
    assert len(rerank.calls) == 1
    assert blocks_of(rerank.calls[0]) == [1, 3, 4]
    assert blocks_of(choice.shortlist) == [1, 3, 4]
    assert reasons(choice.rejected, recall.RANKED) == {("shared", 0, 0), ("shared", 0, 2)}


def test_mixc_keeps_by_rerank_score():
    """MIXC keeps the `keep` shortlisted with the best rerank scores, not the best cosine."""
    rerank = Rerank(by_block={1: 0.1, 3: 0.8, 4: 0.9})
    similarity = {0: 0.6, 1: 0.95, 2: 0.55, 3: 0.9, 4: 0.7, 5: 0.1}
    choice = run_choose(chat_pool(), recall.MIXC, similarity, candidates=3, keep=2, rerank=rerank)
    assert blocks_of(choice.kept) == [3, 4]
    assert {s.item.block: s.rerank for s in choice.kept} == {3: 0.8, 4: 0.9}
    assert ("shared", 0, 1) in reasons(choice.rejected, recall.RANKED)


def test_mixc_falls_back_to_meaning_order_when_rerank_returns_none():
    """A reranker returning None leaves the cosine order: the top `keep` by meaning are kept."""
    rerank = Rerank(None)
    similarity = {0: 0.6, 1: 0.95, 2: 0.55, 3: 0.9, 4: 0.7, 5: 0.1}
    choice = run_choose(chat_pool(), recall.MIXC, similarity, candidates=3, keep=2, rerank=rerank)
    assert len(rerank.calls) == 1
    assert blocks_of(choice.kept) == [1, 3]
    assert all(s.rerank is None for s in choice.kept)


def test_mixc_without_reranker_uses_meaning_order():
    """With no rerank callable at all MIXC keeps the top `keep` by cosine."""
    similarity = {0: 0.6, 1: 0.95, 2: 0.55, 3: 0.9, 4: 0.7, 5: 0.1}
    choice = run_choose(chat_pool(), recall.MIXC, similarity, candidates=3, keep=2, rerank=None)
    assert blocks_of(choice.kept) == [1, 3]


@pytest.mark.parametrize("mode", [recall.SEMANTIC, recall.MIXC, recall.CHRONOLOGICAL])
def test_kept_are_laid_out_oldest_first(mode):
    """Whatever the ranking, the kept come ordered by seq_from."""
    similarity = {0: 0.6, 1: 0.95, 2: 0.55, 3: 0.9, 4: 0.7, 5: 0.8}
    rerank = Rerank(by_block={1: 0.9, 3: 0.5, 5: 0.7, 4: 0.1, 0: 0.2})
    choice = run_choose(chat_pool(), mode, similarity, candidates=5, keep=4, budget=20, rerank=rerank)
    starts = [s.item.seq_from for s in choice.kept]
    assert len(starts) == 4
    assert starts == sorted(starts)


def test_budget_drops_the_lowest_ranked_that_do_not_fit():
    """With room for two 5-word summaries, the third best is rejected with BUDGET."""
    similarity = {0: 0.6, 1: 0.95, 2: 0.55, 3: 0.9, 4: 0.7, 5: 0.1}
    choice = run_choose(chat_pool(), recall.SEMANTIC, similarity, keep=3, budget=12)
    assert blocks_of(choice.kept) == [1, 3]
    assert [r for r in choice.rejected if r.reason == recall.BUDGET] == [
        recall.Rejected(summary("shared", 0, 4, text="summary of block number 4"), recall.BUDGET, 0.7)
    ]


def test_fit_budget_skips_a_long_one_but_keeps_a_shorter_lower_one():
    """A high-ranked summary too long for the budget is dropped; a lower one that fits is kept."""
    long = recall.Scored(summary("shared", 0, 0, text="word " * 50), 0.9)
    short = recall.Scored(summary("shared", 0, 1, text="a few words"), 0.8)
    kept, rejected = recall.fit_budget([long, short], budget=10, count=tokens)
    assert kept == [short]
    assert rejected == [recall.Rejected(long.item, recall.BUDGET, 0.9)]


@pytest.mark.parametrize("mode", [recall.SEMANTIC, recall.MIXC])
def test_nothing_qualifies_gives_empty_memory(mode):
    """All below the floor and no keyword: nothing kept, every member FLOOR, empty memory text."""
    rerank = Rerank([1.0])
    choice = run_choose(chat_pool(), mode, dict.fromkeys(range(6), 0.1), query="hello", rerank=rerank)
    assert choice.kept == []
    assert recall.memory_text(choice.kept) == ""
    assert reasons(choice.rejected, recall.FLOOR) == {("shared", 0, b) for b in range(6)}
    assert rerank.calls == []


# memory_text


def test_memory_text_joins_kept_texts_oldest_first_with_a_blank_line():
    """The memory section is the kept texts, oldest first, separated by one blank line and nothing else."""
    pool = recall.Pool(
        [
            summary("shared", 0, 0, text="The lamp was lit."),
            summary("shared", 0, 1, text="Maren found the key."),
            summary("shared", 0, 2, text="The ferry came late."),
        ],
        [],
    )
    choice = run_choose(pool, recall.SEMANTIC, {0: 0.6, 1: 0.7, 2: 0.9})
    assert recall.memory_text(choice.kept) == (
        "The lamp was lit.\n\nMaren found the key.\n\nThe ferry came late."
    )


def test_memory_text_of_nothing_is_empty():
    """No kept summaries: an empty string."""
    assert recall.memory_text([]) == ""


# sample


def rejections() -> list[recall.Rejected]:
    out = [recall.Rejected(summary("shared", 0, b), recall.LIVE) for b in range(5)]
    out += [recall.Rejected(summary("shared", 0, 10 + b), recall.FLOOR, b / 10) for b in range(5)]
    out += [recall.Rejected(summary("shared", 0, 20), recall.BUDGET, 0.8)]
    out += [recall.Rejected(summary("shared", 0, 30 + b), recall.WITNESS) for b in range(3)]
    return out


def test_sample_shows_every_reason_when_size_allows():
    """With size equal to the number of reasons each reason appears once."""
    picked = recall.sample(rejections(), 4)
    assert sorted(r.reason for r in picked) == sorted(
        [recall.LIVE, recall.FLOOR, recall.BUDGET, recall.WITNESS]
    )


@pytest.mark.parametrize("size", [0, 1, 2, 5, 12])
def test_sample_never_exceeds_size(size):
    """The sample holds at most `size` rejections."""
    picked = recall.sample(rejections(), size)
    assert len(picked) == size
    assert all(r in rejections() for r in picked)


def test_sample_of_fewer_than_size_returns_them_all():
    """When there are fewer rejections than the size, all are returned."""
    everything = rejections()
    picked = recall.sample(everything, 100)
    assert sorted(picked, key=repr) == sorted(everything, key=repr)


def test_sample_takes_the_best_scored_first_within_a_reason():
    """Within FLOOR the highest score is picked first."""
    picked = recall.sample(rejections(), 4)
    floor = [r for r in picked if r.reason == recall.FLOOR]
    assert [r.score for r in floor] == [0.4]


# covered


def test_covered_labels_finer_items_inside_a_higher_tier_member():
    """Finer summaries of the same scope inside a tier-2 member are COVERED; others are not."""
    member = summary("shared", 2, 0)  # 0-127
    inside = [summary("shared", 0, 3), summary("shared", 1, 1), summary("shared", 0, 15)]
    outside = [
        summary("seat-5", 0, 3),  # another scope
        summary("shared", 0, 16),  # 128-135, past the member
        summary("shared", 3, 0),  # a higher tier
        summary("shared", 2, 0),  # the same tier
    ]
    result = recall.covered([member], inside + outside)
    assert result == [recall.Rejected(item, recall.COVERED) for item in inside]


def test_covered_with_no_members_labels_nothing():
    """With an empty pool nothing is covered."""
    assert recall.covered([], [summary("shared", 0, 1)]) == []


# Keyword hits inside roll-ups, names said outright, narrowing


def test_a_keyword_hit_inside_a_rollup_stands_in_for_it():
    """A name found in a tier-0 summary inside a pool roll-up brings that finer summary as the candidate."""
    rollup = summary("shared", 2, 0, keywords=("Inchfallow",))
    hit = summary("shared", 0, 12, keywords=("Saint Quillon",))
    hits = recall.keyword_hits([rollup], [(hit, "Saint Quillon"), (summary("shared", 1, 3), "Saint Quillon")])
    assert hits == {rollup.key: [(hit, "Saint Quillon")]}  # the tier-1 hit containing it is left out
    qualified, rejected = recall.qualify(
        [rollup], {rollup.key: 0.1, hit.key: 0.2}, "Quillon?", floor=0.35, keyword_match=True, hits=hits
    )
    assert [s.item for s in qualified] == [hit] and rejected == []
    assert qualified[0].keyword == "Saint Quillon"  # matched by its last word


def test_hits_in_another_scope_or_outside_the_pool_are_ignored():
    rollup = summary("shared", 1, 0)
    assert (
        recall.keyword_hits([rollup], [(summary("seat-2", 0, 1), "x"), (summary("shared", 0, 9), "y")]) == {}
    )


def test_names_of_the_room_never_match_as_keywords():
    assert (
        recall.keyword_in(["Maren Tallis", "Maren"], "Maren, the lamp!", frozenset({"maren", "tallis"})) == ""
    )


def test_the_best_rollups_are_opened_into_their_tier0_summaries():
    """The pool finds the stretch; the tier-0 summaries inside it compete for the shortlist."""
    rollup, recent = summary("shared", 1, 0), summary("shared", 0, 4)
    close, far = summary("shared", 0, 2), summary("shared", 0, 1)
    similarity = {rollup.key: 0.5, recent.key: 0.55, close.key: 0.8, far.key: 0.1}
    calls = []

    def finer(front):
        calls.append([s.item.key for s in front])
        return {rollup.key: [far, close]}

    choice = recall.choose(
        recall.Pool([rollup, recent], []),
        mode=recall.SEMANTIC,
        similarity=similarity,
        query="q",
        floor=0.35,
        keyword_match=False,
        candidates=8,
        keep=2,
        budget=10_000,
        count=len,
        finer=finer,
    )
    assert calls == [[rollup.key]]  # the roll-ups among the closest, not the tier-0 summaries
    assert [s.item for s in choice.kept] == [close, recent]  # oldest first
    reasons = {r.item.key: r.reason for r in choice.rejected}
    assert reasons == {rollup.key: recall.NARROWED, far.key: recall.FLOOR}


def test_a_rollup_with_nothing_inside_stays_itself():
    rollup = summary("shared", 1, 0)
    candidates, rejected = recall.expand(
        [recall.Scored(rollup, 0.5)], {}, {}, "q", floor=0.35, keyword_match=True
    )
    assert [s.item for s in candidates] == [rollup] and rejected == []


def test_an_opened_tier0_summary_qualifies_by_keyword_below_the_floor():
    rollup, named = summary("shared", 1, 0), summary("shared", 0, 3, keywords=("astrolabe",))
    candidates, _ = recall.expand(
        [recall.Scored(rollup, 0.5)],
        {rollup.key: [named]},
        {named.key: 0.1},
        "the astrolabe?",
        floor=0.35,
        keyword_match=True,
    )
    assert [(s.item, s.keyword) for s in candidates] == [(named, "astrolabe")]


def test_words_match_phrases_by_whole_words_only():
    said = recall.Words("Where is the Brass-Key, and the key's owner?")
    assert said.has("brass key") and said.has("Key") and not said.has("brass keys") and not said.has("ass")


def test_a_rollup_below_the_floor_is_still_opened_when_it_is_among_the_closest():
    """A long roll-up's cosine is diluted: the tier-0 summary inside it that matches is still found."""
    rollup, inside = summary("shared", 2, 0), summary("shared", 0, 5)
    choice = recall.choose(
        recall.Pool([rollup], []),
        mode=recall.SEMANTIC,
        similarity={rollup.key: 0.2, inside.key: 0.7},
        query="q",
        floor=0.35,
        keyword_match=False,
        candidates=8,
        keep=3,
        budget=10_000,
        count=len,
        finer=lambda front: {rollup.key: [inside]},
    )
    assert [s.item for s in choice.kept] == [inside]
    assert [r.reason for r in choice.rejected] == [recall.NARROWED]


# Pinned and person-written memories: sent first, whole, within the budget -------------------------


def words(text: str) -> int:
    return len(text.split())


def added(block: int, text: str, seq_from: int | None = None, seq_to: int | None = None) -> recall.Item:
    return recall.Item(
        key("shared", recall.ADDED_TIER, block), "shared", recall.ADDED_TIER, block, seq_from, seq_to, text
    )


def test_always_first_sends_pinned_before_yours_whatever_the_order_given():
    yours = added(0, "yours one two")
    pinned = summary("shared", 0, 3, text="pinned one two")
    kept, out, used = recall.always_first(
        [(yours, recall.YOURS), (pinned, recall.PINNED)], live_start=1000, budget=3, count=words
    )
    assert [s.item for s in kept] == [pinned]
    assert kept[0].why == recall.PINNED
    assert out == [recall.Rejected(yours, recall.BUDGET)]
    assert used == 3


def test_always_first_sends_each_whole_or_not_at_all_and_fills_with_smaller_ones():
    big = added(0, "a " * 10)
    small = added(1, "tiny memory")
    kept, out, used = recall.always_first(
        [(big, recall.YOURS), (small, recall.YOURS)], live_start=1000, budget=5, count=words
    )
    assert [s.item for s in kept] == [small]
    assert [r.reason for r in out] == [recall.BUDGET]
    assert used == 2


def test_always_first_leaves_out_a_memory_whose_messages_are_all_still_in_the_prompt():
    live = summary("shared", 0, 10, text="still live")
    straddling = added(1, "starts before the window", seq_from=70, seq_to=90)
    kept, out, _ = recall.always_first(
        [(live, recall.PINNED), (straddling, recall.YOURS)], live_start=80, budget=100, count=words
    )
    assert [s.item for s in kept] == [straddling]
    assert out == [recall.Rejected(live, recall.LIVE)]


def test_always_first_lays_out_whole_story_memories_first_then_oldest_first():
    whole = added(0, "the whole story")
    late = summary("shared", 0, 5, text="late")
    early = summary("shared", 1, 0, text="early")
    kept, _, _ = recall.always_first(
        [(late, recall.PINNED), (whole, recall.YOURS), (early, recall.YOURS)],
        live_start=10**6,
        budget=100,
        count=words,
    )
    assert [s.item for s in kept] == [whole, early, late]


def test_without_takes_memories_sent_anyway_out_of_the_pool_with_a_reason():
    a, b = summary("shared", 0, 0), summary("shared", 0, 1)
    pool = recall.Pool(members=[a, b], rejected=[])
    left = recall.without(pool, {a.key})
    assert left.members == [b]
    assert left.rejected == [recall.Rejected(a, recall.SENT_ANYWAY)]
    assert recall.without(pool, set()) is pool


def test_an_added_memory_is_labelled_as_added_and_by_its_messages():
    assert added(0, "x").label == "Added · the whole story"
    assert added(0, "x", 4, 9).label == "Added · messages 4–9"
