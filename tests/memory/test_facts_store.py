"""The store of a room's lasting facts: writes through the real services, the real database, the
real Chroma server and the built-in embedder."""

from __future__ import annotations

import pytest

from memory import index, selectors
from memory.models import SHARED, Fact, seat_scope
from memory.services import catch_up as passes
from memory.services import facts as fact_services
from memory.services import indexing
from memory.services.person import MemoryRefused
from orbchat.connections import embedding
from orbchat.connections import services as connection_services
from orbchat.interop.cards import parse_card_json
from orbchat.library import services as library_services
from rooms import members
from rooms import services as room_services
from tests.factories import join, make_user
from tests.library.cards import v2_card
from tests.memory.conftest import add_story, story_room

pytestmark = pytest.mark.django_db(transaction=True)

PROMISE = "Maren promised to keep the lighthouse lamp burning until the ferry returns."
CORRECTED = "Maren promised to keep the lamp burning only until the storm breaks."
AGAIN = "Maren now keeps the lamp burning every night, storm or not."


def create(room, text: str = PROMISE, **kwargs) -> fact_services.FactOutcome:
    values = {
        "room": room,
        "text": text,
        "category": Fact.Category.PROMISE,
        "subjects": ["Maren"],
        "confidence": 0.8,
        "first_seq": 2,
        "last_seq": 5,
        "source": Fact.Source.MODEL,
        **kwargs,
    }
    return fact_services.fact_create(**values)


def in_index(room, fact: Fact) -> bool:
    generation = selectors.reading_generation(room.host)
    return index.fact_id(fact.pk) in index.stored_ids(generation, "facts", [index.fact_id(fact.pk)])


def found(room, text: str, scopes=(SHARED,)) -> list[int]:
    generation = selectors.reading_generation(room.host)
    vector = embedding.embed_with(generation.model_key, [text])[0]
    return [fact.pk for fact, _ in selectors.facts_query(room, list(scopes), vector, 5)]


@pytest.fixture
def storied(room):
    return story_room(room, 24)


# Writing once ---------------------------------------------------------------------------------


def test_the_same_fact_from_the_same_messages_is_written_once(storied):
    first = create(storied)
    again = create(
        storied, text="  maren PROMISED to keep the lighthouse lamp burning until the ferry returns. "
    )
    assert first.changed and not again.changed and again.reason == fact_services.EXISTS
    assert again.fact.pk == first.fact.pk
    assert Fact.objects.filter(room=storied).count() == 1
    elsewhere = create(storied, first_seq=10, last_seq=12)
    assert elsewhere.changed and Fact.objects.filter(room=storied).count() == 2


def test_running_the_cycle_again_after_a_person_rewrote_a_fact_does_not_bring_the_old_text_back(
    storied, host
):
    fact = create(storied).fact
    fact_services.fact_edit_by_person(actor=host, fact=fact, text="Maren promised nothing; she only hoped.")
    again = create(storied)
    assert not again.changed
    assert list(Fact.objects.filter(room=storied).values_list("text", flat=True)) == [
        "Maren promised nothing; she only hoped."
    ]


def test_a_forgotten_fact_is_not_written_again_by_the_cycle(storied):
    fact = create(storied).fact
    fact_services.fact_forget(fact=fact)
    again = create(storied)
    assert not again.changed
    assert Fact.objects.get(pk=fact.pk).status == Fact.Status.FORGOTTEN
    assert Fact.objects.filter(room=storied).count() == 1


def test_bad_input_is_refused_with_its_reason_and_nothing_is_saved(storied, host):
    with pytest.raises(MemoryRefused, match="at most 300 characters"):
        create(storied, text="x" * 301)
    with pytest.raises(MemoryRefused, match="category") as refused:
        create(storied, category="rumour")
    assert refused.value.field == "category"
    with pytest.raises(MemoryRefused, match="confidence"):
        create(storied, confidence=1.5)
    with pytest.raises(MemoryRefused, match="go up to #23"):
        create(storied, first_seq=20, last_seq=40)
    other = room_services.room_create_from_character(host=host, character=host.characters.get())
    with pytest.raises(MemoryRefused, match="characters"):
        create(storied, scope=seat_scope(other.seats.get().pk))
    assert not Fact.objects.exists()


# Corrections -----------------------------------------------------------------------------------


def test_a_correction_supersedes_and_the_chain_reads_oldest_first(storied):
    first = create(storied).fact
    second = fact_services.fact_correct(fact=first, text=CORRECTED, source=Fact.Source.MODEL).fact
    third = fact_services.fact_correct(
        fact=second, text=AGAIN, source=Fact.Source.EXTRACTOR, confidence=0.4, first_seq=10, last_seq=14
    ).fact
    first.refresh_from_db()
    second.refresh_from_db()
    assert [f.pk for f in selectors.fact_history(third)] == [first.pk, second.pk, third.pk]
    assert [f.pk for f in selectors.fact_history(first)] == [first.pk, second.pk, third.pk]
    assert (first.status, first.superseded_by_id) == (Fact.Status.SUPERSEDED, second.pk)
    assert (second.status, second.superseded_by_id) == (Fact.Status.SUPERSEDED, third.pk)
    assert third.status == Fact.Status.ACTIVE and third.superseded_by_id is None
    assert (second.first_seq, second.last_seq, second.confidence) == (2, 5, 0.8)  # what was not given carries
    assert (third.first_seq, third.last_seq, third.confidence) == (10, 14, 0.4)
    assert list(selectors.facts_for(storied, storied.host)) == [third]


def test_making_the_same_correction_again_changes_nothing(storied):
    first = create(storied).fact
    fact_services.fact_correct(fact=first, text=CORRECTED, source=Fact.Source.MODEL)
    again = fact_services.fact_correct(fact=first, text=CORRECTED, source=Fact.Source.MODEL)
    assert not again.changed and again.reason == fact_services.ALREADY_CORRECTED
    assert Fact.objects.filter(room=storied).count() == 2


def test_a_persons_edit_wins_over_a_later_model_correction(storied, host):
    fact = create(storied).fact
    edited = fact_services.fact_edit_by_person(actor=host, fact=fact, text=CORRECTED).fact
    assert (edited.source, edited.confidence, edited.changed_by) == (Fact.Source.PERSON, 1.0, host)
    attempt = fact_services.fact_correct(fact=edited, text=AGAIN, source=Fact.Source.MODEL)
    assert not attempt.changed and attempt.reason == fact_services.YOURS
    assert attempt.fact.text == CORRECTED and attempt.fact.status == Fact.Status.ACTIVE
    assert not fact_services.fact_forget(fact=edited).changed  # nor does the cycle forget it
    assert not fact_services.fact_unpin(fact=fact_services.fact_pin(fact=edited, actor=host).fact).changed
    assert Fact.objects.filter(room=storied).count() == 1
    assert Fact.objects.get(pk=fact.pk).status == Fact.Status.ACTIVE


# Who sees what ---------------------------------------------------------------------------------


def test_personal_facts_follow_presence(room, host):
    tobin = library_services.character_create(
        owner=host, card=parse_card_json(v2_card(name="Tobin", first_mes=""))
    )
    story_room(room, 16)
    tobins = room_services.seat_add(room=room, character=tobin)  # present from message 16
    add_story(room, 16)
    room_services.room_update(room=room, settings={**room.settings, "own_card_only": True})
    room.refresh_from_db()
    marens = room.seats.get(name="Maren Tallis")
    early = create(room, text="The ledger's last page is missing.", category=Fact.Category.DISCOVERY).fact
    late = create(
        room,
        text="The ferryman lied about his cargo.",
        category=Fact.Category.DISCOVERY,
        first_seq=18,
        last_seq=20,
    ).fact
    hers = create(room, text="Maren distrusts the ferryman.", scope=seat_scope(marens.pk)).fact
    his = create(
        room, text="Tobin owes Harrow a debt.", scope=seat_scope(tobins.pk), first_seq=17, last_seq=19
    ).fact
    member = make_user(actor=host, username="ana")
    join(room, member)
    stranger = make_user(actor=host, username="bo")

    assert set(selectors.facts_for(room, host)) == {early, late, hers, his}
    assert set(selectors.facts_for(room, member)) == {early, late}
    assert not selectors.facts_for(room, stranger).exists()
    assert set(selectors.facts_for(room, marens)) == {early, late, hers}
    assert set(selectors.facts_for(room, tobins)) == {late, his}  # he was not there for messages 2–5
    assert set(selectors.facts_for(room, tobins, category=Fact.Category.DISCOVERY)) == {late}


# The index -------------------------------------------------------------------------------------


def test_forgetting_takes_a_fact_out_of_the_index_and_restoring_puts_it_back(storied, host):
    fact = create(storied).fact
    assert in_index(storied, fact) and found(storied, "the lighthouse lamp and the ferry") == [fact.pk]
    fact_services.fact_forget(fact=fact, actor=host)
    assert not in_index(storied, fact) and found(storied, "the lighthouse lamp and the ferry") == []
    assert list(selectors.facts_for(storied, host, status=Fact.Status.FORGOTTEN)) == [
        Fact.objects.get(pk=fact.pk)
    ]
    restored = fact_services.fact_restore(actor=host, fact=fact).fact
    assert restored.status == Fact.Status.ACTIVE and restored.changed_by == host
    assert in_index(storied, fact) and found(storied, "the lighthouse lamp and the ferry") == [fact.pk]


def test_a_correction_swaps_the_vectors_and_restoring_the_old_one_supersedes_its_successor(storied, host):
    old = create(storied).fact
    new = fact_services.fact_correct(fact=old, text=CORRECTED, source=Fact.Source.MODEL).fact
    assert not in_index(storied, old) and in_index(storied, new)
    fact_services.fact_restore(actor=host, fact=old)
    old.refresh_from_db()
    new.refresh_from_db()
    assert (old.status, old.superseded_by_id) == (Fact.Status.ACTIVE, None)
    assert (new.status, new.superseded_by_id) == (Fact.Status.SUPERSEDED, old.pk)
    assert in_index(storied, old) and not in_index(storied, new)
    assert [f.pk for f in selectors.fact_history(old)] == [old.pk, new.pk]


def test_recall_candidates_keep_to_the_scopes_asked_for(room, host):
    story_room(room, 24)
    room_services.room_update(room=room, settings={**room.settings, "own_card_only": True})
    seat = room.seats.get()
    shared = create(room, text="The brass key opens the customs house.").fact
    own = create(room, text="Maren hid the brass key under the fog bell.", scope=seat_scope(seat.pk)).fact
    assert set(found(room, "where is the brass key")) == {shared.pk}
    assert set(found(room, "where is the brass key", scopes=(SHARED, seat_scope(seat.pk)))) == {
        shared.pk,
        own.pk,
    }


def test_the_next_memory_run_indexes_a_fact_whose_indexing_failed(storied):
    fact = create(storied).fact
    generation = selectors.reading_generation(storied.host)
    index.delete_facts([generation], [index.fact_id(fact.pk)])
    Fact.objects.filter(pk=fact.pk).update(indexed_hash="")  # as a failed embedding leaves it
    passes.catch_up(storied.pk)
    assert in_index(storied, fact)
    assert Fact.objects.get(pk=fact.pk).indexed_hash == index.text_hash(fact.text)


def test_a_new_host_gets_the_facts_in_their_own_index(storied, host):
    fact = create(storied).fact
    heir = make_user(actor=host, username="heir")
    join(storied, heir)
    members.host_offer(room=storied, user_id=heir.pk)
    members.host_accept(room=storied, user=heir)
    storied.refresh_from_db()
    assert Fact.objects.get(pk=fact.pk).indexed_hash == ""  # the old host's copy is to go
    passes.catch_up(storied.pk)
    assert selectors.reading_generation(heir) is not None
    assert in_index(storied, fact) and found(storied, "the lighthouse lamp and the ferry") == [fact.pk]


def test_a_new_embedding_model_reindexes_the_active_facts(storied, host, fake_llm):
    kept = create(storied).fact
    gone = create(storied, text="Old Harrow keeps the tide ledger.").fact
    fact_services.fact_forget(fact=gone, actor=host)
    remote = connection_services.connection_create(
        owner=host, name="Fake embedder", provider="local", model="fake-embed", api_base=fake_llm.base_url
    )
    connection_services.model_roles_update(
        user=host, chat=None, utility=None, embedding=remote, rerank_kind="builtin"
    )
    building, _ = indexing.generations_ensure(host)
    assert indexing.reindex(building.pk)
    ids = [index.fact_id(kept.pk), index.fact_id(gone.pk)]
    assert index.stored_ids(building, "facts", ids) == {index.fact_id(kept.pk)}


# Heat ------------------------------------------------------------------------------------------


def test_warming_adds_heat_up_to_one_and_counts_the_uses(storied):
    fact = create(storied).fact
    cold = create(storied, text="The bells of Inchfallow ring twelve at the storm.").fact
    gone = create(storied, text="Old Harrow keeps the tide ledger.").fact
    fact_services.fact_forget(fact=gone)
    assert fact_services.facts_set_heat(heats={fact.pk: 0.5, cold.pk: -0.2, gone.pk: 1.7}) == 3
    assert fact_services.facts_warm(ids=[fact.pk, gone.pk], amount=0.3) == 1  # a forgotten one is not warmed
    fact.refresh_from_db()
    assert fact.heat == pytest.approx(0.8) and fact.access_count == 1 and fact.last_used_at is not None
    fact_services.facts_warm(ids=[fact.pk], amount=0.5)
    fact.refresh_from_db()
    assert (fact.heat, fact.access_count) == (1.0, 2)
    assert Fact.objects.get(pk=cold.pk).heat == 0.0 and Fact.objects.get(pk=gone.pk).heat == 1.0
    assert [f.pk for f in selectors.facts_for(storied, storied.host, heat_max=0.5)] == [cold.pk]
    with pytest.raises(MemoryRefused):
        fact_services.facts_warm(ids=[fact.pk], amount=-0.1)


def test_stats_count_by_status_and_category(storied, host):
    first = create(storied).fact
    fact_services.fact_correct(fact=first, text=CORRECTED, source=Fact.Source.MODEL)
    goal = create(storied, text="The Traveller wants to reach Inchfallow.", category=Fact.Category.GOAL).fact
    fact_services.fact_pin(fact=goal, actor=host)
    stats = selectors.fact_stats(storied)
    assert stats["total"] == 3 and stats["pinned"] == 1
    assert stats["by_status"] == {"active": 2, "superseded": 1, "forgotten": 0}
    assert stats["by_category"]["promise"] == 2 and stats["by_category"]["goal"] == 1
