"""Which facts go with a reply, and how the Memory section lays them out: pure, no database."""

from __future__ import annotations

import pytest

from memory import facts
from memory.recall import fact_recall
from memory.recall import ranking as recall


def candidate(pk: int, text: str = "", **kwargs) -> fact_recall.Candidate:
    values = {"category": "event", "confidence": 1.0, "heat": 1.0, **kwargs}
    return fact_recall.Candidate(id=pk, text=text or f"Fact {pk}.", **values)


def test_the_score_weighs_relevance_by_confidence_and_heat():
    [picked] = fact_recall.choose(
        [candidate(1, confidence=0.5, heat=0.25)], cosines={1: 0.8}, query="", max_facts=5
    ).recalled
    assert picked.score == pytest.approx(0.8 * 0.75 * 0.75)
    assert picked.score == pytest.approx(facts.score(0.8, 0.5, 0.25))


def test_a_cold_fact_needs_clear_relevance_a_hot_one_the_floor():
    hot = candidate(1, heat=0.9)
    cold = candidate(2, heat=0.1)
    choice = fact_recall.choose([hot, cold], cosines={1: 0.4, 2: 0.4}, query="", max_facts=5)
    assert [p.fact.id for p in choice.recalled] == [1]
    assert [(r.fact.id, r.reason) for r in choice.rejected] == [(2, fact_recall.COLD)]
    choice = fact_recall.choose([cold], cosines={2: 0.2}, query="", max_facts=5)
    assert choice.rejected[0].reason == fact_recall.FLOOR


def test_a_subject_said_in_the_query_makes_a_fact_clearly_relevant_but_a_persons_name_does_not():
    cold = candidate(1, heat=0.0, subjects=("Maren", "the brass key"))
    choice = fact_recall.choose([cold], cosines={}, query="Where is the brass key?", max_facts=5)
    [picked] = choice.recalled
    assert picked.subject == "the brass key" and picked.relevance == fact_recall.WORD_RELEVANCE
    assert picked.reason == "subject “the brass key” · cold"
    choice = fact_recall.choose(
        [candidate(2, subjects=("Maren",))],
        cosines={},
        query="Maren, come here",
        ignore={"maren"},
        max_facts=5,
    )
    assert choice.recalled == []


def test_pinned_and_yours_always_go_and_the_rest_are_capped_best_first():
    found = [
        candidate(1, pinned=True),
        candidate(2, yours=True),
        candidate(3),
        candidate(4),
        candidate(5),
    ]
    choice = fact_recall.choose(found, cosines={3: 0.5, 4: 0.9, 5: 0.7}, query="", max_facts=2)
    assert [p.fact.id for p in choice.pinned] == [1]
    assert [p.fact.id for p in choice.yours] == [2]
    assert [p.fact.id for p in choice.recalled] == [4, 5]
    assert [(r.fact.id, r.reason) for r in choice.rejected] == [(3, recall.RANKED)]
    assert choice.pinned[0].reason == "pinned: sent with every reply"


def test_presence_needs_every_block_of_the_facts_messages():
    def block_of(seq: int) -> int:
        return seq // 8

    assert fact_recall.witnessed(3, 12, {0, 1}, block_of)
    assert not fact_recall.witnessed(3, 20, {0, 1}, block_of)
    assert fact_recall.witnessed(None, None, set(), block_of)  # tied to no messages: everyone's
    assert fact_recall.witnessed(40, 41, None, block_of)  # no presence filter


def test_the_budget_priority_is_read_and_checked():
    assert fact_recall.parse_priority("summaries, facts, quotes, pinned, yours, scene")[0] == "summaries"
    assert fact_recall.parse_priority(", ".join(facts.BUDGET_PRIORITY)) == facts.BUDGET_PRIORITY
    with pytest.raises(ValueError, match="Unknown part “notes”"):
        fact_recall.parse_priority("pinned, yours, notes, facts, summaries, quotes")
    with pytest.raises(ValueError, match="“facts” is named twice"):
        fact_recall.parse_priority("pinned, facts, yours, scene, facts, summaries, quotes")
    with pytest.raises(ValueError, match="leaves out quotes"):
        fact_recall.parse_priority("pinned, yours, scene, facts, summaries")


def test_facts_and_the_scene_are_laid_out_under_short_headings():
    picked = [fact_recall.Picked(candidate(1, "Maren promised to return."), 1.0, 1.0)]
    assert fact_recall.facts_text(picked) == "Lasting facts:\n- Maren promised to return."
    assert fact_recall.facts_text([]) == ""
    assert fact_recall.scene_text("Where: the pier") == "The scene now:\nWhere: the pier"
    assert fact_recall.scene_text("  ") == ""


def test_a_fact_shows_the_days_of_its_messages_when_known():
    dated = fact_recall.Picked(candidate(1, "Maren promised to return.", when="7 May 2023"), 1.0, 1.0)
    assert dated.line == "- Maren promised to return. (7 May 2023)"
    assert fact_recall.facts_text([dated]) == "Lasting facts:\n- Maren promised to return. (7 May 2023)"


def test_a_parts_heading_is_paid_once_with_its_first_item():
    parts = {"summaries": ["aaaa", "bb"], "quotes": ["cc", "dd"]}
    fitted = facts.budget_order(parts, budget=9, cost=len, overhead={"quotes": 3})
    assert fitted == {"summaries": ["aaaa", "bb"], "quotes": []}  # 3 left: not a quote and its heading
    fitted = facts.budget_order(parts, budget=11, cost=len, overhead={"quotes": 3})
    assert fitted == {"summaries": ["aaaa", "bb"], "quotes": ["cc"]}
