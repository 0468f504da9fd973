"""Recall through the real services: the database, the Chroma server and the built-in models."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from memory import selectors
from memory.models import MemoryTuning, Summary
from memory.recall import ranking as recall
from memory.recall import recaller
from memory.services import catch_up as passes
from memory.services import tuning as tuning_services
from memory.turn_memory import recall_dry_run
from orbchat.connections import services as connection_services
from orbchat.interop.cards import parse_card_json
from orbchat.library import services as library_services
from rooms import services as room_services
from rooms.prompting import TurnContext, plan_turn
from tests.library.cards import v2_card
from tests.memory.conftest import rerank_from_nowhere, story_room

pytestmark = pytest.mark.django_db(transaction=True)

PLANTED = "Maren buried the silver astrolabe beneath the ruined chapel of Saint Quillon at midnight."
PLANT_AT = 100


WHO = ["Tobin", "Ilse", "Corwin", "the harbourmaster", "the ferryman", "Old Harrow", "the customs clerk"]
DID = ["mended", "sold", "lost", "counted", "painted", "carried", "weighed", "burned"]
WHAT = [
    "the fishing nets",
    "a crate of lemons",
    "the church roof",
    "three lanterns",
    "the tide tables",
    "a wool blanket",
    "the winter firewood",
    "a broken oar",
    "the post sack",
    "a jar of honey",
]
WHERE = [
    "at the market",
    "on the north pier",
    "behind the bakery",
    "in the boathouse",
    "by the school",
    "near the seal rocks",
    "in the tavern cellar",
    "up at the quarry",
]


def varied(seq: int) -> str:
    """A different small happening for every message, so that blocks differ as in a real story."""
    return (
        f"{WHO[seq % 7]} {DID[seq % 8]} {WHAT[(seq * 3) % 10]} {WHERE[(seq * 5) % 8]}, "
        f"and {WHO[(seq + 3) % 7]} {DID[(seq + 5) % 8]} {WHAT[(seq * 7 + 1) % 10]}."
    )


@pytest.fixture
def long_room(room, chat):
    """450 varied messages with a planted fact at message 100, summarised and indexed."""
    story_room(room, 450, plant={seq: varied(seq) for seq in range(450)} | {PLANT_AT: PLANTED})
    passes.catch_up(room.pk)
    return room


def tune(**fields) -> MemoryTuning:
    tuning = selectors.tuning_get()
    for name, value in fields.items():
        setattr(tuning, name, value)
    tuning.save()
    return tuning


def ask(room, text: str):
    """The host sends `text`; return the plan of the reply it would get."""
    room_services.message_create(room=room, author=room.host, text=text)
    room.refresh_from_db()
    return plan_turn(turn=TurnContext.of(room), seat=room_services.speaking_seat(room))


def memory_section(plan) -> str:
    return "\n".join(m["content"] for m in plan.prompt.messages if m["content"].startswith("Past events:"))


def covers_plant(kept) -> bool:
    return any(s.item.seq_from <= PLANT_AT <= s.item.seq_to for s in kept)


def test_a_chat_that_fits_in_the_context_recalls_nothing(room, host, fake_llm):
    connection_services.connection_create(
        owner=host,
        name="Big",
        provider="local",
        model="fake-model",
        api_base=fake_llm.base_url,
        context_size=32000,
    )
    story_room(room, 60, plant={20: PLANTED})
    passes.catch_up(room.pk)
    assert Summary.objects.filter(room=room).exists()
    plan = ask(room, "Where is the astrolabe buried?")
    assert plan.recall.state == "done" and plan.recall.count == 0
    assert memory_section(plan) == ""
    assert {r.reason for r in plan.recall.rejected} == {recall.LIVE}


def test_a_planted_fact_300_messages_back_is_recalled_by_keyword(long_room):
    tune(score_floor=0.99)  # nothing qualifies by meaning: only the keyword route can bring it back
    plan = ask(long_room, "Tell me again about Quillon.")
    assert plan.recall.count >= 1
    assert covers_plant(plan.recall.kept)
    assert any(s.keyword for s in plan.recall.kept)
    assert "Quillon" in memory_section(plan)
    first_live = plan.prompt.history_kept[0]
    assert first_live > PLANT_AT + 250  # it really had scrolled out


def test_a_planted_fact_is_recalled_by_meaning_without_its_keywords(long_room):
    tune(keyword_match=False)
    plan = ask(long_room, "Where did Maren bury the silver astrolabe, by the ruined chapel?")
    assert covers_plant(plan.recall.kept)
    assert all(not s.keyword for s in plan.recall.kept)
    assert all(s.score >= 0.35 for s in plan.recall.kept)


def test_recalled_summaries_are_laid_out_oldest_first_under_the_heading(long_room):
    tune(score_floor=0.0, keep=3)
    plan = ask(long_room, "The brass key and the tide ledger, where are they?")
    kept = plan.recall.kept
    assert len(kept) == 3
    assert [s.item.seq_from for s in kept] == sorted(s.item.seq_from for s in kept)
    section = memory_section(plan)
    assert section.startswith("Past events:\n")
    at = 0
    for s in kept:  # each text appears after the one before (two blocks may read alike)
        at = section.index(s.item.text.strip(), at) + 1
    # Nothing recalled overlaps what the prompt still holds word for word.
    assert all(s.item.seq_to < plan.prompt.history_kept[0] for s in kept)


def test_the_memory_budget_caps_recalled_text(long_room):
    tune(score_floor=0.0, keep=10, candidates=10, budget_share=0.05)  # 200 tokens of 4,000
    plan = ask(long_room, "The brass key and the tide ledger, where are they?")
    section = memory_section(plan)
    assert len(section) // 4 <= 210
    assert any(r.reason == recall.BUDGET for r in plan.recall.rejected)


def test_chronological_mode_takes_the_latest_scrolled_out_summaries_without_search(long_room):
    tune(mode="chronological")
    plan = ask(long_room, "Quillon?")
    kept = plan.recall.kept
    assert kept and all(s.score == 0.0 for s in kept)
    live = plan.prompt.history_kept[0]
    assert max(s.item.seq_to for s in kept) >= live - 16  # the stretch just before the live window


def test_mode_off_and_the_hosts_switch_off_run_no_recall(long_room):
    tune(mode="off")
    assert ask(long_room, "Quillon?").recall.state == "off"
    tune(mode="mixC")
    tuning_services.remember_set(user=long_room.host, on=False)
    long_room.refresh_from_db()
    plan = ask(long_room, "Quillon?")
    assert plan.recall.state == "off" and memory_section(plan) == ""


def test_a_failing_reranker_falls_back_to_meaning_order_with_a_notice(long_room, host):
    rerank_from_nowhere(host)
    tune(keyword_match=False)
    plan = ask(long_room, "Where did Maren bury the silver astrolabe, by the ruined chapel?")
    assert any("Rerank model failed" in n and "/nonexistent/cross-encoder" in n for n in plan.recall.notices)
    kept = plan.recall.kept
    assert len(kept) == 3 and all(s.rerank is None for s in kept)
    below = [r.score for r in plan.recall.rejected if r.reason == recall.RANKED]
    assert below and min(s.score for s in kept) >= max(below)  # the best three by meaning


def test_a_failing_embedder_gives_a_notice_and_no_memory(room, host, chat, fake_llm):
    embedding = connection_services.connection_create(
        owner=host, name="Emb", provider="local", model="fake-embed", api_base=fake_llm.base_url
    )
    connection_services.model_roles_update(
        user=host, chat=chat, utility=None, embedding=embedding, rerank_kind="builtin"
    )
    story_room(room, 400, plant={PLANT_AT: PLANTED})
    passes.catch_up(room.pk)
    recaller.forget_cached_vectors()
    fake_llm.embeddings_status = 500
    plan = ask(room, "Tell me again about Quillon.")
    assert plan.recall.count == 0 and memory_section(plan) == ""
    assert any(n.startswith("Your library couldn't be searched") for n in plan.recall.notices)


def test_personal_memory_drops_stretches_the_speaker_was_not_seated_for(long_room, host):
    room = long_room
    tune(score_floor=0.0, keep=50, candidates=50, budget_share=0.9)
    wren = library_services.character_create(
        owner=host, card=parse_card_json(v2_card(name="Wren", first_mes=""))
    )
    room_services.room_update(room=room, settings={**room.settings, "own_card_only": True})
    newcomer = room_services.seat_add(room=room, character=wren)  # seated from message 450 on
    story_room(room, 540)
    passes.catch_up(room.pk)
    room.refresh_from_db()
    outcome = recall_dry_run(room=room, seat=newcomer, text="What happened before I came?")
    assert outcome.state == "done" and outcome.pool > 0
    assert outcome.kept and all(s.item.seq_from >= 448 for s in outcome.kept)  # its block, 448–455
    assert any(r.reason == recall.WITNESS for r in outcome.rejected)
    first = room.seats.exclude(pk=newcomer.pk).get()
    outcome = recall_dry_run(room=room, seat=first, text="What happened before?")
    assert any(s.item.seq_to < 448 for s in outcome.kept)


def test_the_pool_reuses_vectors_between_turns(long_room):
    recaller.forget_cached_vectors()
    first = ask(long_room, "What do you make of it?")
    cached = set(recaller._vectors)
    assert len(cached) >= first.recall.pool > 0
    ask(long_room, "And then?")
    # The pool's vectors were reused; at most a keyword hit or two was new.
    assert cached <= set(recaller._vectors) and len(recaller._vectors) - len(cached) <= 2


def test_memory_recall_command_prints_the_dry_run_as_json(long_room):
    out = StringIO()
    call_command(
        "memory_recall", str(long_room.pk), "--message", "Tell me about Quillon.", "--json", stdout=out
    )
    report = json.loads(out.getvalue())
    assert set(report) == {"mode", "query", "pool", "count", "kept", "quotes", "rejected"}
    assert report["mode"] == "mixC" and report["query"].endswith("Tell me about Quillon.")
    assert report["count"] == len(report["kept"]) + len(report["quotes"]) and report["kept"]
    assert all(set(q) == {"seq", "speaker", "score", "text"} for q in report["quotes"])
    assert set(report["kept"][0]) == {"tier", "block", "seq_from", "seq_to", "score", "text"}
    assert all(set(r) == {"tier", "block", "reason"} for r in report["rejected"])
    assert any(k["seq_from"] <= PLANT_AT <= k["seq_to"] for k in report["kept"])
    assert not long_room.recall_logs.exists()  # a dry run keeps nothing


def test_memory_recall_command_names_a_missing_room_or_speaker(long_room):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No room with id 999999"):
        call_command("memory_recall", "999999", "--message", "hi")
    with pytest.raises(CommandError, match="No seated character named 'Nobody'"):
        call_command("memory_recall", str(long_room.pk), "--message", "hi", "--speaker", "Nobody")


def test_quotes_follow_the_tuning_count_and_switch(long_room):
    tune(quotes=1)
    assert len(ask(long_room, "Where is the silver astrolabe now?").recall.quotes) == 1
    tune(quotes_on=False)
    plan = ask(long_room, "Where is the silver astrolabe now?")
    assert plan.recall.quotes == []
    assert "Quotes from the past" not in memory_section(plan)


REFRAINS = [
    "The kettle is singing again; do you want another cup?",
    "*She pulls her shawl tighter as the wind comes off the water.*",
    "We should sleep soon, there is work at first light.",
    "The gulls were at the bins again this morning.",
    "It is quiet tonight. Too quiet, my mother would have said.",
]


def test_a_paraphrase_finds_the_one_line_that_differs_in_a_chat_of_refrains(room, chat):
    """Every message repeats the chat's refrains; the planted line sits among them. Asked in
    other words, the quote is that line, not one more copy of a refrain."""
    texts = {seq: f"{REFRAINS[seq % 5]} {REFRAINS[(seq + 2) % 5]}" for seq in range(300)}
    texts[60] = (
        f"{REFRAINS[0]} My brother Anselm drowned off Gull Reef the winter I turned twelve. {REFRAINS[3]}"
    )
    story_room(room, 300, plant=texts)
    passes.catch_up(room.pk)
    plan = ask(room, "How did you lose your sibling when you were a child?")
    quotes = plan.recall.quotes
    assert 60 in [q.turn.seq for q in quotes]
    assert len({q.text for q in quotes}) == len(quotes)  # no refrain twice
