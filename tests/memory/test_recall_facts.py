"""Lasting facts and the scene note in recall, through the real services: the database, the Chroma
server, the built-in embedder, the prompt as the Chat model would get it, and Context used."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse

from memory import facts, selectors
from memory.models import Fact, seat_scope
from memory.recall import fact_recall, recaller
from memory.services import catch_up as passes
from memory.services import facts as fact_services
from memory.services import recall_log, scene
from memory.turn_memory import recall_dry_run
from orbchat.connections import services as connection_services
from orbchat.interop.cards import parse_card_json
from orbchat.library import services as library_services
from orbchat.prompting.assemble import default_count_tokens
from rooms import services as room_services
from rooms.models import Message
from rooms.prompting import TurnContext, plan_turn
from tests.factories import join, make_user
from tests.library.cards import v2_card
from tests.memory.conftest import story_room

pytestmark = pytest.mark.django_db(transaction=True)

KEY_FACT = "Maren hid the brass key inside the fog bell."
JAM_FACT = "Tobin prefers plum jam to honey."
SCENE = facts.SceneNote(where="the lighthouse gallery", who=("Maren Tallis",), when="dusk")


@pytest.fixture
def small_chat(host, fake_llm):
    """A Chat model with a small context: most of an 80-message story scrolls out."""
    return connection_services.connection_create(
        owner=host,
        name="Fake",
        provider="local",
        model="fake-model",
        api_base=fake_llm.base_url,
        context_size=1500,
    )


@pytest.fixture
def told(room, small_chat):
    story_room(room, 80)
    passes.catch_up(room.pk)
    return room


def fact(room, text: str, *, subjects=(), heat: float = 1.0, **kwargs) -> Fact:
    values = {
        "category": Fact.Category.DISCOVERY,
        "confidence": 0.9,
        "first_seq": 10,
        "last_seq": 12,
        "source": Fact.Source.MODEL,
        **kwargs,
    }
    made = fact_services.fact_create(room=room, text=text, subjects=list(subjects), **values).fact
    if heat != 1.0:
        fact_services.facts_set_heat(heats={made.pk: heat})
        made.refresh_from_db()
    return made


def sent_on_7_may_2023(room) -> None:
    """Date the messages the facts made here come from (10 to 12)."""
    moment = dt.datetime(2023, 5, 7, 12, tzinfo=dt.UTC)
    Message.objects.filter(room=room, seq__range=(10, 12)).update(created_at=moment)


def ask(room, text: str):
    room_services.message_create(room=room, author=room.host, text=text)
    room.refresh_from_db()
    return plan_turn(turn=TurnContext.of(room), seat=room_services.speaking_seat(room))


def prompt_text(plan) -> str:
    return "\n".join(m["content"] for m in plan.prompt.messages)


def sent_ids(outcome) -> set[int]:
    return {p.fact.id for p in outcome.facts}


def test_a_relevant_fact_goes_into_the_prompt_dated_with_the_scene_note(told):
    Message.objects.filter(room=told, seq__range=(10, 12)).update(
        created_at=dt.datetime(2023, 5, 7, tzinfo=dt.UTC)
    )
    key = fact(told, KEY_FACT, subjects=["brass key"])
    scene.scene_note_update(room=told, note=SCENE, source=scene.READER, upto_seq=79)
    plan = ask(told, "Where did she put the brass key?")
    assert key.pk in sent_ids(plan.recall)
    text = prompt_text(plan)
    assert f"{fact_recall.FACTS_HEADING}\n- {KEY_FACT} (7 May 2023)" in text
    assert f"{fact_recall.SCENE_HEADING}\nWhere: the lighthouse gallery" in text
    assert plan.recall.live_start > 12  # the fact's messages had scrolled out


def test_a_cold_fact_that_is_not_clearly_relevant_stays_out(told):
    jam = fact(told, JAM_FACT, subjects=["plum jam"], heat=0.05, category=Fact.Category.PREFERENCE)
    outcome = recall_dry_run(room=told, seat=told.seats.first(), text="Where did she put the brass key?")
    assert outcome.state == "done"
    assert jam.pk not in sent_ids(outcome)
    assert JAM_FACT not in outcome.text
    reasons = {r.fact.id: r.reason for r in outcome.facts_rejected}
    assert reasons[jam.pk] in (fact_recall.COLD, fact_recall.FLOOR)
    # Said by name, the same cold fact is clearly relevant and comes back.
    outcome = recall_dry_run(room=told, seat=told.seats.first(), text="Does he like plum jam?")
    assert jam.pk in sent_ids(outcome)


def test_a_personal_fact_goes_only_to_the_seat_that_has_it(room, small_chat, host):
    tobin = library_services.character_create(
        owner=host, card=parse_card_json(v2_card(name="Tobin", first_mes=""))
    )
    room_services.room_update(room=room, settings={**room.settings, "own_card_only": True})
    tobins = room_services.seat_add(room=room, character=tobin)
    story_room(room, 80)
    passes.catch_up(room.pk)
    room.refresh_from_db()
    marens = room.seats.exclude(pk=tobins.pk).get()
    his = fact(room, "Tobin owes Old Harrow a debt of nine crowns.", scope=seat_scope(tobins.pk), pinned=True)
    for_him = recall_dry_run(room=room, seat=tobins, text="What do you owe?")
    for_her = recall_dry_run(room=room, seat=marens, text="What does Tobin owe Old Harrow?")
    assert his.pk in sent_ids(for_him)
    assert his.pk not in sent_ids(for_her)
    assert "nine crowns" not in for_her.text
    narrator = recall_dry_run(room=room, seat=None, text="What does Tobin owe Old Harrow?")
    assert his.pk not in sent_ids(narrator)


def test_a_tight_budget_keeps_pinned_and_the_scene_before_facts_before_summaries(told):
    tuning = selectors.tuning_get()
    tuning.quotes_on = False  # the budget here is summaries, facts and the scene note alone
    tuning.save()
    sent_on_7_may_2023(told)
    pinned = fact(told, "The lamp must never go out.", pinned=True, category=Fact.Category.CONDITION)
    key = fact(told, KEY_FACT, subjects=["brass key"])
    scene.scene_note_update(room=told, note=SCENE, source=scene.READER, upto_seq=79)
    count = default_count_tokens
    note = fact_recall.scene_text(selectors.scene_note_text(told))
    budget = (
        count(fact_recall.FACTS_HEADING)
        + count(f"- {pinned.text} (7 May 2023)")
        + count(note)
        + count(f"- {key.text} (7 May 2023)")
        + 2  # less than any summary
    )
    kwargs = {
        "room": told,
        "seat": told.seats.first(),
        "query_texts": ["The brass key and the tide ledger, where are they?"],
        "live_start": 60,
        "count": count,
    }
    outcome = recaller.recall_for(budget=budget, **kwargs)
    assert [p.fact.id for p in outcome.facts] == [pinned.pk, key.pk]
    assert outcome.scene and outcome.kept == []
    assert any(r.reason == fact_recall.BUDGET for r in outcome.cut)  # summaries were there to send
    # The order is tunable: with summaries first, a budget that holds the smallest one goes to it.
    smallest = min(count(r.item.text) for r in outcome.cut if r.reason == fact_recall.BUDGET)
    tuning.budget_priority = "summaries, quotes, facts, scene, pinned, yours"
    tuning.save()
    outcome = recaller.recall_for(budget=count(fact_recall.FACTS_HEADING) + smallest, **kwargs)
    assert len(outcome.kept) == 1
    assert outcome.facts == [] and outcome.scene == ""
    assert {p.fact.id for p in outcome.facts_cut} == {pinned.pk, key.pk}


def test_a_sent_fact_warms_and_counts_a_use_when_the_reply_is_logged_not_on_a_dry_run(told):
    key = fact(told, KEY_FACT, subjects=["brass key"], heat=0.3)
    outcome = recall_dry_run(room=told, seat=told.seats.first(), text="Where is the brass key?")
    assert key.pk in sent_ids(outcome)
    key.refresh_from_db()
    assert key.heat == pytest.approx(0.3) and key.access_count == 0  # the Preview changes nothing
    recall_log.log_save(room_id=told.pk, variant_id=None, speaker="Maren", outcome=outcome)
    key.refresh_from_db()
    assert key.heat == pytest.approx(0.8)
    assert key.access_count == 1 and key.last_used_at is not None


def test_context_used_shows_the_host_the_detail_and_a_member_only_the_counts(told, client, host):
    key = fact(told, KEY_FACT, subjects=["brass key"])
    outcome = recall_dry_run(room=told, seat=told.seats.first(), text="Where is the brass key?")
    reply = Message.objects.filter(room=told, kind=Message.Kind.CHARACTER).order_by("-seq").first()
    variant = reply.variants.first()
    recall_log.log_save(room_id=told.pk, variant_id=variant.pk, speaker="Maren", outcome=outcome)
    url = reverse("memory:context_used", args=[told.pk, variant.pk])

    client.force_login(host)
    page = client.get(url).content.decode()
    assert KEY_FACT in page and f"#{key.pk}" in page and "score" in page
    assert "1 fact" in page

    member = make_user(actor=host, username="ana")
    join(told, member)
    client.force_login(member)
    response = client.get(url)
    assert response.status_code == 200
    page = response.content.decode()
    assert "1 fact" in page
    assert KEY_FACT not in page and f"#{key.pk}" not in page and "score" not in page
    assert selectors.context_used(told, member, variant.pk)["detail"] is None

    stranger = make_user(actor=host, username="bo")
    client.force_login(stranger)
    assert client.get(url).status_code == 404


def test_the_preview_shows_the_facts_sent(told, client, host):
    fact(told, KEY_FACT, subjects=["brass key"])
    outcome = recall_dry_run(room=told, seat=told.seats.first(), text="Where is the brass key?")
    preview = outcome.preview()
    assert [f["text"] for f in preview["facts"]] == [KEY_FACT]
    assert preview["facts"][0]["reason"].startswith("subject “brass key”")
