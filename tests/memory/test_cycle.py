"""The memory cycle through the real services, database and Chroma, with the fake provider as the
Utility model: facts from tool calls and from the fallback formats, corrections, the extractor,
re-runs, a person's edit, Cancel, decay and trim."""

from __future__ import annotations

import json

import pytest

from memory import facts, index, selectors
from memory.models import SHARED, Fact, MemoryTuning, RoomMemory, Summary, seat_scope
from memory.services import catch_up as passes
from memory.services import facts as fact_services
from orbchat.connections import selectors as connection_selectors
from orbchat.connections import services as connection_services
from orbchat.interop.cards import parse_card_json
from orbchat.library import services as library_services
from rooms import services as room_services
from tests.fakes.llm import Reply
from tests.library.cards import v2_card
from tests.memory.conftest import add_story, story_room

pytestmark = pytest.mark.django_db(transaction=True)

VOW = "Maren promised the Traveller to keep the fog bell ringing until the ferry is home."
SUMMARY = Reply(json.dumps({"heading": "At the lighthouse", "facts": ["The key was found."], "keywords": []}))
PLANT = {3: "I promise to bring the tide ledger back to the customs house."}


@pytest.fixture
def utility(host, fake_llm):
    return utility_for(host, fake_llm)


def utility_for(host, fake_llm):
    connection = connection_services.connection_create(
        owner=host, name="Fake utility", provider="local", model="fake-utility", api_base=fake_llm.base_url
    )
    roles = connection_selectors.model_roles_get(user=host)
    connection_services.model_roles_update(
        user=host, chat=roles.chat, utility=connection, embedding=None, rerank_kind="builtin"
    )
    return connection


def tool(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def calls(*tool_calls: dict) -> Reply:
    return Reply("", tool_calls=list(tool_calls))


def create_vow(**arguments) -> dict:
    return tool("create_fact", text=VOW, category="promise", subjects=["Maren"], confidence=0.9, **arguments)


def active(room) -> list[Fact]:
    return list(Fact.objects.filter(room=room, status=Fact.Status.ACTIVE))


def manager_requests(fake_llm) -> list[dict]:
    return [r.body for r in fake_llm.requests if "Facts kept" in str(r.body.get("messages"))]


def test_streamed_to_the_cycle_panel_the_managers_tool_calls_write_the_same_facts(room, utility, fake_llm):
    fake_llm.script(SUMMARY, calls(create_vow(), tool("pin_fact", id=999)))
    story_room(room, 16)
    heard: list[str] = []
    passes.catch_up(room.pk, on_text=heard.append)
    (fact,) = active(room)
    assert (fact.text, fact.category, fact.subjects) == (VOW, "promise", ["Maren"])
    assert all(request.body.get("stream") for request in fake_llm.requests)  # every call streamed
    assert VOW in "".join(heard)  # the tool call's arguments, shown as they came
    assert heard.count("") == 2  # two calls opened: the summary's and the manager's
    assert "#999" in RoomMemory.objects.get(room=room).last_error  # the second call, read apart


def test_tool_calls_create_facts_over_the_block(room, utility, fake_llm):
    fake_llm.script(SUMMARY, calls(create_vow()))
    story_room(room, 16)
    passes.catch_up(room.pk)
    (fact,) = active(room)
    assert (fact.text, fact.category, fact.source) == (VOW, "promise", Fact.Source.MODEL)
    assert (fact.first_seq, fact.last_seq, fact.confidence, fact.scope) == (0, 7, 0.9, SHARED)
    (request,) = manager_requests(fake_llm)
    assert {t["function"]["name"] for t in request["tools"]} >= {"create_fact", "update_fact"}
    assert "#3 Traveller:" in request["messages"][-1]["content"]
    assert RoomMemory.objects.get(room=room).last_error == ""


def test_a_correction_supersedes_and_keeps_the_old_one(room, utility, fake_llm):
    story_room(room, 16)
    old = fact_services.fact_create(
        room=room, text=VOW, category="promise", subjects=["Maren"], source="model", first_seq=0, last_seq=1
    ).fact
    corrected = "Maren let the fog bell fall silent once the ferry was sighted."
    fake_llm.script(SUMMARY, calls(tool("update_fact", id=old.pk, text=corrected, reason="the ferry came")))
    passes.catch_up(room.pk)
    (request,) = manager_requests(fake_llm)
    assert f"#{old.pk} [promise] {VOW}" in request["messages"][-1]["content"]
    old.refresh_from_db()
    (new,) = active(room)
    assert new.text == corrected and new.category == "promise" and new.source == Fact.Source.MODEL
    assert old.status == Fact.Status.SUPERSEDED and old.superseded_by_id == new.pk and old.text == VOW


def test_a_fenced_json_answer_is_read_when_no_tool_was_called(room, utility, fake_llm):
    answer = {"operations": [{"op": "create", "text": VOW, "category": "promise", "subjects": ["Maren"]}]}
    fake_llm.script(SUMMARY, Reply(f"Here you go:\n```json\n{json.dumps(answer)}\n```"))
    story_room(room, 16)
    passes.catch_up(room.pk)
    assert [f.text for f in active(room)] == [VOW]


def test_a_provider_that_refuses_tools_is_asked_once_more_for_the_fallback_format(room, utility, fake_llm):
    xml = f'<create category="promise" subjects="Maren">{VOW}</create>'
    fake_llm.script(SUMMARY, Reply(status=400, error_message="tools are not supported"), Reply(xml))
    story_room(room, 16)
    passes.catch_up(room.pk)
    assert [f.text for f in active(room)] == [VOW]
    first, second = manager_requests(fake_llm)
    assert "tools" in first and "tools" not in second
    assert '{"operations": [' in second["messages"][0]["content"]


def test_prose_saves_nothing_and_says_so(room, utility, fake_llm):
    fake_llm.script(SUMMARY, Reply("Maren seems to care a lot about the bell, I think."))
    story_room(room, 16)
    report = passes.catch_up(room.pk)
    assert active(room) == []
    assert any("Nothing was saved" in notice for notice in report.notices)
    assert "Nothing was saved" in RoomMemory.objects.get(room=room).last_error


def test_without_a_utility_model_the_extractor_writes_at_low_confidence(room):
    story_room(room, 16, plant=PLANT)
    passes.catch_up(room.pk)
    facts = active(room)
    assert "Traveller promised to bring the tide ledger back to the customs house." in [f.text for f in facts]
    assert all(f.source == Fact.Source.EXTRACTOR and f.confidence <= 0.5 for f in facts)


def test_a_re_run_changes_nothing_and_asks_nothing(room, utility, fake_llm):
    fake_llm.script(SUMMARY, calls(create_vow()))
    story_room(room, 16)
    passes.catch_up(room.pk)
    before = [(f.pk, f.text, f.status, f.heat) for f in Fact.objects.filter(room=room)]
    asked = len(fake_llm.requests)
    passes.catch_up(room.pk)
    assert len(fake_llm.requests) == asked
    assert [(f.pk, f.text, f.status, f.heat) for f in Fact.objects.filter(room=room)] == before


def test_a_persons_edited_fact_survives_the_cycle(room, host, utility, fake_llm):
    story_room(room, 16)
    fact = fact_services.fact_create(
        room=room, text=VOW, category="promise", source="model", first_seq=0, last_seq=1
    ).fact
    mine = "Maren swore on her mother's grave to keep the bell ringing."
    fact_services.fact_edit_by_person(actor=host, fact=fact, text=mine)
    fake_llm.script(
        SUMMARY,
        calls(
            tool("update_fact", id=fact.pk, text="Maren forgot the bell."), tool("delete_fact", id=fact.pk)
        ),
    )
    passes.catch_up(room.pk)
    fact.refresh_from_db()
    assert (fact.text, fact.status, fact.source) == (mine, Fact.Status.ACTIVE, Fact.Source.PERSON)
    assert [f.pk for f in active(room)] == [fact.pk]


def test_cancel_while_the_manager_answers_leaves_no_part_of_the_block(room, utility, fake_llm):
    fake_llm.script(
        SUMMARY, calls(create_vow(), tool("create_fact", text="The bell is cracked.", category="condition"))
    )
    story_room(room, 16)
    passes.backfill(room.pk, cancelled=lambda: len(manager_requests(fake_llm)) >= 1)
    assert RoomMemory.objects.get(room=room).backfill == RoomMemory.Backfill.CANCELLED
    assert active(room) == []
    assert Summary.objects.get(room=room, tier=0, block=0).manager_hash == ""
    fake_llm.script(calls(create_vow()))
    passes.catch_up(room.pk)  # the next run reads the block whole
    assert [f.text for f in active(room)] == [VOW]


def make(room, text: str, **kwargs) -> Fact:
    values = {"category": "event", "source": "model", "first_seq": 0, "last_seq": 1, **kwargs}
    return fact_services.fact_create(room=room, text=text, **values).fact


def test_each_cycle_cools_the_facts_nobody_recalled(room):
    story_room(room, 16)
    passes.catch_up(room.pk)  # cycle 1
    pinned = make(room, "The lamp must never go out.", pinned=True)
    recalled = make(room, "Harrow owes Maren a boat.")
    unused = make(room, "Harrow's ledger lists a crate of lamp oil.")
    add_story(room, 8)
    passes.catch_up(room.pk)  # cycle 2: cools all three but the pinned one
    fact_services.facts_warm(ids=[recalled.pk], amount=0.5)  # recall used it: hot again
    add_story(room, 8)
    passes.catch_up(room.pk)  # cycle 3: cools only what was not recalled since cycle 2
    heat = dict(Fact.objects.filter(room=room).values_list("pk", "heat"))
    assert heat[pinned.pk] == 1.0 and heat[recalled.pk] == 1.0
    assert heat[unused.pk] == pytest.approx(0.81)
    passes.catch_up(room.pk)  # no new block: no cycle, no cooling
    assert Fact.objects.get(pk=unused.pk).heat == pytest.approx(0.81)


def in_index(room, facts_: list[Fact]) -> set[int]:
    """Which of these facts the room's vector index holds."""
    ids = {index.fact_id(f.pk): f.pk for f in facts_}
    return {ids[i] for i in index.stored_ids(selectors.reading_generation(room.host), "facts", list(ids))}


def test_a_cycle_trims_the_least_important_unpinned_facts_restorably(room):
    MemoryTuning(pk=1, facts_max=10).save()
    story_room(room, 16)
    passes.catch_up(room.pk)
    pinned = make(room, "The lamp must never go out.", pinned=True, confidence=0.1)
    yours = fact_services.fact_add_by_person(
        actor=room.host, room=room, text="Maren is afraid of the dark.", category="trait", confidence=0.01
    ).fact
    weak = [make(room, f"Someone may have seen a boat, number {n}.", confidence=0.01) for n in range(2)]
    for n in range(9):
        make(room, f"Harrow's ledger lists cargo number {n}.")
    add_story(room, 8)
    passes.catch_up(room.pk)
    assert len(active(room)) == 10
    forgotten = list(Fact.objects.filter(room=room, status=Fact.Status.FORGOTTEN))
    assert {f.pk for f in weak} <= {f.pk for f in forgotten}
    assert not {pinned.pk, yours.pk} & {f.pk for f in forgotten}  # a pin and a person's own fact stay
    assert in_index(room, forgotten) == set()  # recall no longer finds what was trimmed
    assert in_index(room, active(room)) == {f.pk for f in active(room)}
    fact_services.fact_restore(actor=room.host, fact=weak[0])  # soft: it comes back
    assert Fact.objects.get(pk=weak[0].pk).status == Fact.Status.ACTIVE
    assert in_index(room, [weak[0]]) == {weak[0].pk}


def test_every_fact_a_block_wrote_is_in_the_index_after_the_cycle(room, utility, fake_llm):
    lamp = tool("create_fact", text="The lamp is lit.", category="event")
    fake_llm.script(
        SUMMARY, calls(create_vow(), lamp, tool("create_fact", text="Harrow owes a boat.", category="event"))
    )
    story_room(room, 16)
    passes.catch_up(room.pk)
    written = active(room)
    assert sorted(f.text for f in written) == sorted([VOW, "The lamp is lit.", "Harrow owes a boat."])
    assert in_index(room, written) == {f.pk for f in written}
    assert all(f.indexed_hash == f.text_hash for f in written)


def test_hot_facts_past_their_token_budget_turn_cold_but_stay(room):
    MemoryTuning(pk=1, facts_hot_tokens=100).save()
    story_room(room, 16)
    passes.catch_up(room.pk)
    made = [make(room, f"Harrow's ledger lists cargo number {n}: " + "crates of oil, " * 8) for n in range(8)]
    add_story(room, 8)
    passes.catch_up(room.pk)
    assert {f.pk for f in active(room)} == {f.pk for f in made}  # nothing forgotten
    heats = sorted(Fact.objects.filter(room=room).values_list("heat", flat=True), reverse=True)
    hot = [h for h in heats if facts.is_hot(h)]
    assert 1 <= len(hot) < len(made)  # what fits the 100 tokens stays hot
    assert all(h <= facts.DEMOTED_HEAT for h in heats[len(hot) :])


def test_each_characters_own_set_gets_facts_from_its_point_of_view(room, host, utility, fake_llm):
    tobin = library_services.character_create(
        owner=host, card=parse_card_json(v2_card(name="Tobin", first_mes=""))
    )
    story_room(room, 16)
    seat = room_services.seat_add(room=room, character=tobin)  # present from message 16
    add_story(room, 16)
    room_services.room_update(room=room, settings={**room.settings, "own_card_only": True})
    fake_llm.default = calls(tool("create_fact", text="The lamp is lit.", category="event"))
    passes.catch_up(room.pk)
    tobins = Fact.objects.filter(room=room, scope=seat_scope(seat.pk))
    assert list(tobins.values_list("first_seq", "last_seq")) == [(16, 23)]  # only what Tobin was there for
    maren = room.seats.get(name="Maren Tallis")
    assert Fact.objects.filter(room=room, scope=seat_scope(maren.pk)).count() == 3
    assert Fact.objects.filter(room=room, scope=SHARED).count() == 3
    assert any(
        "as Tobin's own memory" in body["messages"][0]["content"] for body in manager_requests(fake_llm)
    )


def test_a_failing_utility_model_in_a_run_that_falls_back_leaves_the_facts_to_the_extractor(
    room, utility, fake_llm
):
    fake_llm.script(SUMMARY, Reply(status=503))
    story_room(room, 16, plant=PLANT)
    report = passes.catch_up(room.pk, on_provider_error="fallback")
    assert [(f.text, f.source) for f in active(room)] == [
        ("Traveller promised to bring the tide ledger back to the customs house.", Fact.Source.EXTRACTOR)
    ]
    assert report.problems and "problem on its side" in RoomMemory.objects.get(room=room).last_error


def test_a_catch_up_reads_only_a_few_blocks_summarised_before_it(room, host, fake_llm):
    story_room(room, 72)  # eight blocks, summarised by the built-in summariser
    passes.catch_up(room.pk)
    Summary.objects.filter(room=room).update(manager_hash="")  # as before facts existed
    utility_for(host, fake_llm)
    passes.catch_up(room.pk)
    assert len(manager_requests(fake_llm)) == passes.MANAGER_BLOCKS_PER_RUN == 4
    passes.catch_up(room.pk)
    assert len(manager_requests(fake_llm)) == 8
    passes.catch_up(room.pk)
    assert len(manager_requests(fake_llm)) == 8  # every block read once
