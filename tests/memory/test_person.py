"""A person's changes to a room's memory (edit, forget, add, pin, generate now, rebuild) through the
real services, the real database, the real Chroma server and the built-in embedder."""

from __future__ import annotations

import numpy as np
import pytest

from memory import index, selectors
from memory.models import SHARED, Summary
from memory.recall import ranking as recall
from memory.recall import recaller
from memory.services import catch_up as passes
from memory.services import person
from memory.services import tuning as tuning_services
from orbchat.connections import embedding
from orbchat.prompting.assemble import default_count_tokens
from rooms import services as room_services
from rooms.models import Room
from tests.memory.conftest import story_room

pytestmark = pytest.mark.django_db(transaction=True)

CORRECTION = (
    "Maren hid the silver astrolabe in the crypt of Saint Quillon.\n"
    "- The Traveller swore to tell nobody.\n"
    "Keywords: astrolabe, Saint Quillon"
)


def built(room, total: int, **kwargs):
    """A room of `total` messages whose memory is written and indexed (the built-in summariser)."""
    story_room(room, total, **kwargs)
    passes.catch_up(room.pk)
    return room


def at(room, tier: int, block: int) -> Summary:
    return Summary.objects.get(room=room, scope=SHARED, tier=tier, block=block)


def exists(room, tier: int, block: int) -> bool:
    return Summary.objects.filter(room=room, scope=SHARED, tier=tier, block=block).exists()


def tune(**fields) -> None:
    tuning = selectors.tuning_get()
    for name, value in fields.items():
        setattr(tuning, name, value)
    tuning.save()


def other_room(host):
    return room_services.room_create_from_character(host=host, character=host.characters.get())


# Edit -------------------------------------------------------------------------------------------


def test_an_edit_replaces_the_text_and_makes_the_memory_yours(room):
    built(room, 16)
    _, notice = person.memory_edit(room=room, summary_id=at(room, 0, 0).pk, text=f"  {CORRECTION}\n")
    summary = at(room, 0, 0)
    assert notice == ""
    assert summary.text == CORRECTION
    assert summary.source == Summary.Source.PERSON and summary.get_source_display() == "Yours"
    assert summary.heading == "Maren hid the silver astrolabe in the crypt of Saint Quillon."
    assert summary.facts == ["The Traveller swore to tell nobody."]
    assert summary.keywords == ["astrolabe", "Saint Quillon"]
    assert (summary.seq_from, summary.seq_to) == (0, 7)  # it still covers its messages


def test_an_edited_memory_is_found_by_its_new_text_at_once(room):
    built(room, 40)
    person.memory_edit(room=room, summary_id=at(room, 0, 1).pk, text=CORRECTION)
    summary = at(room, 0, 1)
    generation = selectors.reading_generation(room.host)
    stored = index.memory_vectors(generation, [index.memory_id(summary)])[index.memory_id(summary)]
    assert summary.indexed_hash == index.text_hash(CORRECTION)
    assert np.allclose(stored, embedding.embed_with(generation.model_key, [CORRECTION])[0], atol=1e-4)
    found = selectors.memory_search(room, q="Where did Maren hide the silver astrolabe?", limit=3)
    assert found[0][0] == summary


def test_the_roll_up_over_an_edited_memory_is_rewritten_with_it_but_the_edit_never_is(room):
    built(room, 40)
    person.memory_edit(room=room, summary_id=at(room, 0, 1).pk, text=CORRECTION)
    stale = set(Summary.objects.filter(room=room, stale=True).values_list("tier", "block"))
    assert stale == {(1, 0)}
    room_services.message_edit(message=room.messages.get(seq=10), text="The ferry sank off the seal rocks.")
    assert not at(room, 0, 1).stale  # a change to its messages does not touch a person's memory
    roll_up_before = at(room, 1, 0).text
    passes.catch_up(room.pk)
    edited, roll_up = at(room, 0, 1), at(room, 1, 0)
    assert edited.text == CORRECTION and edited.source == Summary.Source.PERSON
    assert not roll_up.stale
    assert "Saint Quillon" not in roll_up_before and "Saint Quillon" in roll_up.text  # the correction


@pytest.mark.parametrize("text", ["", "   \n  "])
def test_an_edit_to_empty_text_is_refused_and_changes_nothing(room, text):
    built(room, 16)
    before = at(room, 0, 0).text
    with pytest.raises(person.MemoryRefused, match="needs some text") as refused:
        person.memory_edit(room=room, summary_id=at(room, 0, 0).pk, text=text)
    assert refused.value.field == "text"
    assert at(room, 0, 0).text == before and at(room, 0, 0).source == Summary.Source.EXTRACTIVE


def test_an_edit_over_2000_characters_is_refused_naming_the_limit(room):
    built(room, 16)
    before = at(room, 0, 0).text
    with pytest.raises(person.MemoryRefused, match="at most 2,000 characters; this one has 2,001"):
        person.memory_edit(room=room, summary_id=at(room, 0, 0).pk, text="x" * 2001)
    assert at(room, 0, 0).text == before


def test_a_memory_of_another_room_cannot_be_edited_through_this_one(room, host):
    elsewhere = other_room(host)
    theirs, _ = person.memory_add(room=elsewhere, text="The other story's secret.")
    with pytest.raises(person.MemoryRefused, match="no longer exists"):
        person.memory_edit(room=room, summary_id=theirs.pk, text=CORRECTION)
    theirs.refresh_from_db()
    assert theirs.text == "The other story's secret."


# Forget -----------------------------------------------------------------------------------------


def test_a_forgotten_memory_stays_forgotten_and_its_stretch_is_reported_uncovered(room):
    built(room, 40)
    person.memory_forget(room=room, summary_id=at(room, 0, 1).pk)
    assert not exists(room, 0, 1)
    assert selectors.forgotten_blocks(room) == [(SHARED, 0, 1)]
    passes.catch_up(room.pk)
    assert not exists(room, 0, 1)
    assert exists(room, 0, 0) and exists(room, 0, 2) and exists(room, 0, 3)
    assert selectors.memory_gaps(room)["forgotten"] == [{"tier": 0, "block": 1, "seq_from": 8, "seq_to": 15}]


def test_the_roll_up_over_a_forgotten_memory_is_rewritten_without_it(room):
    planted = {seq: f"Corwin painted the Inchfallow lighthouse teal, stroke {seq}." for seq in range(8, 16)}
    built(room, 40, plant=planted)
    assert "Corwin" in at(room, 1, 0).text
    person.memory_forget(room=room, summary_id=at(room, 0, 1).pk)
    assert at(room, 1, 0).stale
    passes.catch_up(room.pk)
    roll_up = at(room, 1, 0)
    assert not roll_up.stale and "Corwin" not in roll_up.text
    assert (roll_up.seq_from, roll_up.seq_to) == (0, 31)


def test_rebuild_brings_a_forgotten_memory_back(room):
    built(room, 40)
    person.memory_forget(room=room, summary_id=at(room, 0, 1).pk)
    assert person.memory_rebuild(room=room, seq_from=8, seq_to=15) == 2  # it, and the roll-up over it
    passes.catch_up(room.pk)
    back = at(room, 0, 1)
    assert (back.seq_from, back.seq_to) == (8, 15) and back.source == Summary.Source.EXTRACTIVE
    assert selectors.memory_gaps(room)["forgotten"] == []


def test_forgetting_an_added_memory_leaves_nothing_uncovered(room):
    built(room, 16)
    added, _ = person.memory_add(room=room, text="Maren fears the fog bell.")
    person.memory_forget(room=room, summary_id=added.pk)
    assert not Summary.objects.filter(pk=added.pk).exists()
    assert selectors.forgotten_blocks(room) == []


# Add --------------------------------------------------------------------------------------------


def test_an_added_memory_is_shared_yours_and_indexed(room):
    story_room(room, 10)
    added, notice = person.memory_add(room=room, text="Maren fears the fog bell.\nKeywords: fog bell")
    added.refresh_from_db()
    assert notice == ""
    assert (added.scope, added.tier, added.block) == (SHARED, Summary.ADDED, 0)
    assert added.source == Summary.Source.PERSON and added.keywords == ["fog bell"]
    assert (added.seq_from, added.seq_to) == (None, None)
    assert added.label == "Added · the whole story"
    assert added.indexed_hash == index.text_hash(added.text)


def test_an_added_memory_may_be_tied_to_messages(room):
    story_room(room, 10)
    person.memory_add(room=room, text="A first one.")
    added, _ = person.memory_add(room=room, text="Harrow lied about the cargo.", seq_from=3, seq_to=6)
    added.refresh_from_db()
    assert added.block == 1  # numbered after the first
    assert added.label == "Added · messages 3–6"
    assert added.first_at == room.messages.get(seq=3).created_at
    assert added.last_at == room.messages.get(seq=6).created_at


@pytest.mark.parametrize(
    ("seq_from", "seq_to", "field", "says"),
    [
        (3, None, "seq_from", "both the first and the last"),
        (None, 6, "seq_from", "both the first and the last"),
        (6, 3, "seq_from", "not after the last"),
        (3, 10, "seq_to", "go up to #9"),
    ],
)
def test_a_bad_message_range_is_refused_naming_the_field(room, seq_from, seq_to, field, says):
    story_room(room, 10)
    with pytest.raises(person.MemoryRefused, match=says) as refused:
        person.memory_add(room=room, text="Harrow lied.", seq_from=seq_from, seq_to=seq_to)
    assert refused.value.field == field
    assert not Summary.objects.filter(room=room).exists()


def test_a_rewind_keeps_added_memories_tied_to_what_remains(room):
    built(room, 40)
    early, _ = person.memory_add(room=room, text="Harrow lied.", seq_from=2, seq_to=20)
    late, _ = person.memory_add(room=room, text="The ferry came.", seq_from=30, seq_to=35)
    whole, _ = person.memory_add(room=room, text="Maren fears the fog bell.")
    room_services.message_delete(message=room.messages.get(seq=12), and_after=True)
    for added in (early, late, whole):
        added.refresh_from_db()
    assert (early.seq_from, early.seq_to) == (2, 11)
    assert (late.seq_from, late.seq_to) == (None, None)  # all its messages went: about the story now
    assert whole.text == "Maren fears the fog bell."
    assert not Summary.objects.filter(room=room, tier__lt=Summary.ADDED, seq_to__gte=12).exists()
    passes.catch_up(room.pk)
    assert Summary.objects.filter(room=room, tier=Summary.ADDED).count() == 3


# Pin --------------------------------------------------------------------------------------------


def test_a_memory_can_be_pinned_and_unpinned(room):
    built(room, 16)
    summary = at(room, 0, 0)
    person.memory_pin(room=room, summary_id=summary.pk, pinned=True)
    assert list(selectors.memory_list(room, show="pinned")) == [summary]
    person.memory_pin(room=room, summary_id=summary.pk, pinned=False)
    assert not at(room, 0, 0).pinned and not selectors.memory_list(room, show="pinned").exists()


# Generate the next memory now -------------------------------------------------------------------


def test_generate_next_writes_the_next_stretch_on_each_press_then_stops(room):
    story_room(room, 13)  # nothing is due yet: the newest eight are never summarised on their own
    passes.catch_up(room.pk)
    assert not Summary.objects.filter(room=room).exists()
    first = person.memory_generate_next(room=room)
    assert (first.tier, first.block, first.seq_from, first.seq_to, first.stale) == (0, 0, 0, 7, False)
    second = person.memory_generate_next(room=room)
    assert (second.tier, second.block, second.seq_from, second.seq_to) == (0, 1, 8, 11)
    assert second.stale  # cut short: rewritten whole once its block is complete
    assert person.memory_generate_next(room=room) is None


def test_a_memory_cut_short_is_rewritten_whole_once_its_block_completes(room):
    story_room(room, 13)
    first = person.memory_generate_next(room=room)
    person.memory_generate_next(room=room)
    story_room(room, 24)
    passes.catch_up(room.pk)
    whole = at(room, 0, 1)
    assert (whole.seq_from, whole.seq_to, whole.stale) == (8, 15, False)
    assert at(room, 0, 0).updated_at == first.updated_at  # the complete one is left as it was


def test_pressing_generate_again_after_the_chat_grew_covers_what_the_cut_short_memory_missed(room):
    story_room(room, 13)
    person.memory_generate_next(room=room)  # messages 0–7
    person.memory_generate_next(room=room)  # messages 8–11, cut short at the newest
    story_room(room, 20)  # 12–19 arrive; block 1 (8–15) is not due for the worker yet
    passes.catch_up(room.pk)
    person.memory_generate_next(room=room)
    assert Summary.objects.filter(room=room, tier=0, seq_from__lte=12, seq_to__gte=12).exists()


def test_generate_next_is_refused_when_memory_is_off(room, host):
    story_room(room, 13)
    tuning_services.remember_set(user=host, on=False)
    room = Room.objects.get(pk=room.pk)  # as a request would load it, with the host's new choice
    with pytest.raises(person.MemoryRefused, match="Memory is off"):
        person.memory_generate_next(room=room)
    assert not Summary.objects.filter(room=room).exists()


# Rebuild ----------------------------------------------------------------------------------------


def test_rebuild_marks_the_models_memories_in_the_stretch_stale_and_keeps_yours(room):
    built(room, 40)
    person.memory_edit(room=room, summary_id=at(room, 0, 2).pk, text=CORRECTION)
    person.memory_add(room=room, text="Harrow lied.", seq_from=8, seq_to=20)
    passes.catch_up(room.pk)
    count = person.memory_rebuild(room=room, seq_from=8, seq_to=23)
    stale = set(Summary.objects.filter(room=room, stale=True).values_list("tier", "block"))
    assert stale == {(0, 1), (1, 0)} and count == 2
    passes.catch_up(room.pk)
    assert not Summary.objects.filter(room=room, stale=True).exists()
    assert at(room, 0, 2).text == CORRECTION
    assert Summary.objects.get(room=room, tier=Summary.ADDED).text == "Harrow lied."


def test_rebuild_without_an_end_reaches_the_newest_memory(room):
    built(room, 40)
    assert person.memory_rebuild(room=room, seq_from=24) == 2
    stale = set(Summary.objects.filter(room=room, stale=True).values_list("tier", "block"))
    assert stale == {(0, 3), (1, 0)}


# Recall of pinned and added memories ------------------------------------------------------------


@pytest.fixture
def steered(room):
    """64 messages of memory, a pinned tier-0 memory and one the host added."""
    built(room, 64)
    tune(score_floor=0.0, keep=3)
    pinned = person.memory_pin(room=room, summary_id=at(room, 0, 2).pk, pinned=True)
    added, _ = person.memory_add(room=room, text="The Traveller owes Maren three silver coins.")
    return room, pinned, added


def recall_now(room, *, budget: int) -> recaller.Outcome:
    return recaller.recall_for(
        room=room,
        seat=None,
        query_texts=["Where is the brass key from the customs house?"],
        live_start=56,
        budget=budget,
        count=default_count_tokens,
    )


def test_pinned_and_added_memories_are_sent_whole_ahead_of_recalled_ones(steered):
    room, pinned, added = steered
    outcome = recall_now(room, budget=100_000)
    whys = [s.why for s in outcome.kept]
    assert whys[:2] == [recall.YOURS, recall.PINNED]  # laid out: the unanchored one, then by place
    assert whys[2:] and set(whys[2:]) == {recall.RECALLED}
    assert [s.item.key for s in outcome.kept[:2]] == [index.memory_id(added), index.memory_id(pinned)]
    assert outcome.text.startswith(f"{added.text}\n\n{pinned.text.strip()}")


def test_a_tight_budget_keeps_the_pinned_memory_and_cuts_the_rest(steered):
    room, pinned, added = steered
    outcome = recall_now(room, budget=default_count_tokens(pinned.text))
    assert [(s.item.key, s.why) for s in outcome.kept] == [(index.memory_id(pinned), recall.PINNED)]
    cut = {r.item.key for r in outcome.cut}
    assert index.memory_id(added) in cut and len(cut) > 1  # yours, and the recalled that qualified
    assert all(r.reason == recall.BUDGET for r in outcome.cut)
    assert added.text not in outcome.text
