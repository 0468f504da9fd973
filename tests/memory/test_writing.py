"""Memory writing through the real services, the real database and the real Chroma server."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext

from memory import index, selectors
from memory.forms import MemoryTuningForm
from memory.models import Scene, Summary, seat_scope
from memory.services import catch_up as passes
from memory.services import indexing
from memory.services import tuning as tuning_services
from orbchat.connections import selectors as connection_selectors
from orbchat.connections import services as connection_services
from orbchat.interop.cards import parse_card_json
from orbchat.library import services as library_services
from rooms import services as room_services
from tests.fakes.llm import Reply
from tests.library.cards import v2_card
from tests.memory.conftest import add_story, story_room

pytestmark = pytest.mark.django_db(transaction=True)


def tiers(room, scope="shared") -> dict[int, int]:
    counts: dict[int, int] = {}
    for tier in Summary.objects.filter(room=room, scope=scope).values_list("tier", flat=True):
        counts[tier] = counts.get(tier, 0) + 1
    return counts


@pytest.fixture
def utility(host, fake_llm):
    """The host's Utility model is the fake provider."""
    connection = connection_services.connection_create(
        owner=host, name="Fake utility", provider="local", model="fake-utility", api_base=fake_llm.base_url
    )
    roles = connection_selectors.model_roles_get(user=host)
    connection_services.model_roles_update(
        user=host, chat=roles.chat, utility=connection, embedding=None, rerank_kind="builtin"
    )
    return connection


def answer(heading="Maren and the Traveller at the lighthouse", facts=("The brass key opens the cellar.",)):
    return Reply(json.dumps({"heading": heading, "facts": list(facts), "keywords": ["brass key", "cellar"]}))


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (15, {}),
        (16, {0: 1}),
        (40, {0: 4, 1: 1}),
        (200, {0: 24, 1: 6, 2: 1}),
        (600, {0: 74, 1: 18, 2: 4, 3: 1}),
    ],
)
def test_summaries_appear_at_the_right_messages_with_the_right_tiers(room, messages, expected):
    story_room(room, messages)
    passes.catch_up(room.pk)
    assert tiers(room) == expected
    if expected:
        first = Summary.objects.get(room=room, tier=0, block=0)
        assert (first.seq_from, first.seq_to) == (0, 7)
        assert first.source == Summary.Source.EXTRACTIVE
        assert first.text.strip()


def test_roll_ups_cover_their_children(room):
    story_room(room, 40)
    passes.catch_up(room.pk)
    roll_up = Summary.objects.get(room=room, tier=1, block=0)
    assert (roll_up.seq_from, roll_up.seq_to) == (0, 31)


def test_the_utility_model_writes_summaries_as_structured_output(room, utility, fake_llm):
    fake_llm.script(answer())
    story_room(room, 16)
    passes.catch_up(room.pk)
    summary = Summary.objects.get(room=room, tier=0, block=0)
    assert summary.source == Summary.Source.UTILITY and summary.model.endswith("fake-utility")
    assert summary.heading == "Maren and the Traveller at the lighthouse"
    assert summary.facts == ["The brass key opens the cellar."]
    assert "#3 Traveller:" in fake_llm.requests[0].body["messages"][-1]["content"]


def test_a_model_that_ignores_the_format_still_gives_a_summary(room, utility, fake_llm):
    fake_llm.script(
        Reply("Maren guarded the light. The Traveller found the brass key. They argued about Harrow.")
    )
    story_room(room, 16)
    passes.catch_up(room.pk)
    summary = Summary.objects.get(room=room, tier=0, block=0)
    assert summary.heading and summary.facts
    assert "brass key" in summary.text


def test_running_twice_writes_nothing_new(room, utility, fake_llm):
    story_room(room, 40)
    first = passes.catch_up(room.pk)
    calls = len(fake_llm.requests)
    second = passes.catch_up(room.pk)
    assert first.written == 5 and second.written == 0
    assert len(fake_llm.requests) == calls


def test_an_edit_rewrites_exactly_its_block_and_the_roll_ups_above(room, utility, fake_llm):
    story_room(room, 40)
    passes.catch_up(room.pk)
    before = {(s.tier, s.block): s.updated_at for s in Summary.objects.filter(room=room)}
    calls = len(fake_llm.requests)
    message = room.messages.get(seq=18)
    room_services.message_edit(message=message, text="The lighthouse keeper sold the brass key to Harrow.")
    assert set(Summary.objects.filter(room=room, stale=True).values_list("tier", "block")) == {(0, 2), (1, 0)}
    passes.catch_up(room.pk)
    after = {(s.tier, s.block): s.updated_at for s in Summary.objects.filter(room=room)}
    changed = {key for key in after if after[key] != before[key]}
    assert changed == {(0, 2), (1, 0)}
    assert (
        len(fake_llm.requests) == calls + 3
    )  # the two summaries, and the memory manager reads block 2 again
    assert not Summary.objects.filter(room=room, stale=True).exists()


def test_hiding_a_message_rewrites_its_block_without_it(room, utility, fake_llm):
    story_room(room, 16, plant={3: "The secret word is PERIWINKLE, spoken only at the fog bell."})
    passes.catch_up(room.pk)
    assert "PERIWINKLE" in fake_llm.requests[-1].body["messages"][-1]["content"]
    calls = len(fake_llm.requests)
    room_services.message_set_hidden(message=room.messages.get(seq=3), hidden=True)
    passes.catch_up(room.pk)
    assert len(fake_llm.requests) == calls + 2  # the summary, and the memory manager's reading of the block
    assert all("PERIWINKLE" not in r.body["messages"][-1]["content"] for r in fake_llm.requests[calls:])


def test_switching_the_swipe_of_a_summarised_message_marks_it_stale(room):
    story_room(room, 16)
    passes.catch_up(room.pk)
    room_services.swipe  # noqa: B018 - the swipe service is exercised through the edit path below
    message = room.messages.get(seq=2)
    message.variants.create(room=room, index=1, text="Another take entirely.", tokens=4)
    room_services.swipe(message=message, direction=1)
    assert Summary.objects.get(room=room, tier=0, block=0).stale


def test_person_written_summaries_are_never_overwritten(room):
    story_room(room, 40)
    passes.catch_up(room.pk)
    Summary.objects.filter(room=room, tier=0, block=1).update(source=Summary.Source.PERSON, text="Mine.")
    room_services.message_edit(message=room.messages.get(seq=9), text="Changed.")
    passes.catch_up(room.pk)
    assert Summary.objects.get(room=room, tier=0, block=1).text == "Mine."


def test_a_rewind_removes_the_summaries_of_the_removed_stretch(room):
    story_room(room, 200)
    passes.catch_up(room.pk)
    room_services.message_delete(message=room.messages.get(seq=100), and_after=True)
    assert not Summary.objects.filter(room=room, seq_to__gte=100).exists()
    assert Summary.objects.filter(room=room, tier=0, block=11).exists()  # 88–95 untouched
    passes.catch_up(room.pk)
    # 100 messages left: blocks up to 95 still describe messages that exist, so they stay.
    assert tiers(room) == {0: 12, 1: 3}


def test_summaries_and_scenes_reach_the_vector_index_once(room):
    story_room(room, 40)
    passes.catch_up(room.pk)
    generation = selectors.reading_generation(room.host)
    memories = index._collection(generation, "memories")
    scenes = index._collection(generation, "scenes")
    assert memories.count() == 5 and scenes.count() == 4
    meta = memories.get(ids=[f"m:{room.pk}:shared:1:0"], include=["metadatas"])["metadatas"][0]
    assert meta == {
        "room": room.pk,
        "host": room.host_id,
        "scope": "shared",
        "tier": 1,
        "block": 0,
        "seq_from": 0,
        "seq_to": 31,
        "at": meta["at"],
    }
    room_services.message_edit(message=room.messages.get(seq=5), text="Rewritten line about the fog bell.")
    passes.catch_up(room.pk)
    assert memories.count() == 5 and scenes.count() == 4  # replaced, not duplicated
    assert Scene.objects.filter(room=room).count() == 4


def chunk_text(room, block: int) -> str:
    generation = selectors.reading_generation(room.host)
    return index.index_records(generation, "scenes", [index.scene_id(room.pk, block)])[
        index.scene_id(room.pk, block)
    ][0]


def catch_up_reads(room) -> int:
    """Run a catch-up; return how many times it read a stretch of messages."""
    with CaptureQueriesContext(connection) as queries:
        passes.catch_up(room.pk)
    return sum(1 for q in queries if q["sql"].startswith("SELECT") and 'FROM "rooms_message"' in q["sql"])


def test_a_catch_up_reads_only_new_and_changed_stretches_however_long_the_chat(room, host):
    story_room(room, 40)
    passes.catch_up(room.pk)
    longer = room_services.room_create_from_character(host=host, character=room.seats.get().character)
    story_room(longer, 400)
    passes.catch_up(longer.pk)
    # After one more message, a chat ten times longer reads no more of its history.
    reads = []
    for chat in (room, longer):
        room_services.message_create(room=chat, author=host, text="The lamp gutters.")
        reads.append(catch_up_reads(chat))
    assert reads[0] == reads[1]
    room_services.message_edit(message=longer.messages.get(seq=5), text="Rewritten line about the fog bell.")
    # The edited stretch, for its summary, for its chunk and for the memory manager, and the
    # built-in summariser's chat statistics asking for the messages added since its last read (none).
    assert catch_up_reads(longer) == reads[1] + 4
    assert "fog bell" in chunk_text(longer, 0)


def catch_up_counted(room) -> tuple[passes.Report, int]:
    """Run a catch-up; return its report and how many queries it made."""
    with CaptureQueriesContext(connection) as queries:
        report = passes.catch_up(room.pk)
    return report, len(queries)


def test_an_unchanged_chat_plans_nothing_in_as_many_queries_however_long(room, host):
    longer = room_services.room_create_from_character(host=host, character=room.seats.get().character)
    story_room(room, 40)
    story_room(longer, 400)
    counts = []
    for chat in (room, longer):
        passes.catch_up(chat.pk)
        report, queries = catch_up_counted(chat)
        assert (report.written, report.deleted, report.indexed) == (0, 0, 0)
        counts.append(queries)
    assert counts[0] == counts[1]


def test_an_edit_to_one_old_message_replans_only_its_block_in_as_many_queries_however_long(room, host):
    longer = room_services.room_create_from_character(host=host, character=room.seats.get().character)
    story_room(room, 200)
    story_room(longer, 400)
    counts = []
    for chat in (room, longer):
        passes.catch_up(chat.pk)
        before = {(s.tier, s.block): s.updated_at for s in Summary.objects.filter(room=chat)}
        room_services.message_edit(message=chat.messages.get(seq=5), text="The ferryman stole the brass key.")
        report, queries = catch_up_counted(chat)
        after = {(s.tier, s.block): s.updated_at for s in Summary.objects.filter(room=chat)}
        assert {key for key in after if after[key] != before[key]} == {(0, 0), (1, 0), (2, 0)}
        assert report.written == 3 and report.scenes_indexed == 1
        assert "ferryman stole" in chunk_text(chat, 0)
        counts.append(queries)
    assert counts[0] == counts[1]


def test_a_summary_indexed_before_its_hash_was_stored_is_indexed_again_once(room):
    story_room(room, 40)
    passes.catch_up(room.pk)
    Summary.objects.filter(room=room, tier=0, block=1).update(text_hash="")  # as the migration found it
    assert passes.catch_up(room.pk).indexed == 1
    assert passes.catch_up(room.pk).indexed == 0


def test_a_new_block_size_cuts_the_transcript_chunks_anew(room):
    story_room(room, 40)
    passes.catch_up(room.pk)
    before = chunk_text(room, 0)
    tuning = selectors.tuning_get()
    form = MemoryTuningForm(data={**model_to_dict(tuning), "block_size": 4}, instance=tuning)
    assert form.is_valid(), form.errors
    tuning_services.tuning_update(form=form)
    passes.catch_up(room.pk)
    after = chunk_text(room, 0)
    assert before.count("\n#") == 7 and after.count("\n#") == 3  # 8 messages a chunk, then 4
    assert Scene.objects.get(room=room, block=0).seq_to == 3


def test_personal_sets_follow_presence(room, host):
    tobin = library_services.character_create(
        owner=host, card=parse_card_json(v2_card(name="Tobin", first_mes=""))
    )
    story_room(room, 16)
    seat = room_services.seat_add(room=room, character=tobin)  # present from message 16
    add_story(room, 24)
    room_services.room_update(room=room, settings={**room.settings, "own_card_only": True})
    passes.catch_up(room.pk)
    maren = room.seats.get(name="Maren Tallis")
    assert tiers(room, seat_scope(maren.pk)) == {0: 4, 1: 1}
    mine = Summary.objects.filter(room=room, scope=seat_scope(seat.pk))
    assert sorted(mine.filter(tier=0).values_list("block", flat=True)) == [2, 3]
    assert not mine.filter(tier=1).exists() or mine.get(tier=1).seq_from >= 16
    assert "Tobin" in mine.filter(tier=0).first().heading


def test_memory_off_writes_nothing(room, host):
    host.remember_long_chats = False
    host.save(update_fields=["remember_long_chats"])
    story_room(room, 40)
    passes.catch_up(room.pk)
    assert not Summary.objects.filter(room=room).exists()


def test_a_new_embedding_model_reindexes_and_then_switches_over(room, host, fake_llm):
    story_room(room, 40)
    passes.catch_up(room.pk)
    old = selectors.reading_generation(host)
    remote = connection_services.connection_create(
        owner=host, name="Fake embedder", provider="local", model="fake-embed", api_base=fake_llm.base_url
    )
    connection_services.model_roles_update(
        user=host, chat=None, utility=None, embedding=remote, rerank_kind="builtin"
    )
    (building, still_ready) = indexing.generations_ensure(host)
    assert building.state == "building" and still_ready.pk == old.pk
    assert selectors.reading_generation(host).pk == old.pk  # recall keeps the old index meanwhile
    room_services.message_edit(message=room.messages.get(seq=3), text="A change while re-indexing.")
    passes.catch_up(room.pk)  # new work goes to both generations
    assert indexing.reindex(building.pk)
    assert selectors.reading_generation(host).pk == building.pk
    old.refresh_from_db()
    assert old.state == "retired"
    fresh = index._collection(building, "memories")
    assert fresh.count() == 5 and index._collection(building, "scenes").count() == 4
    assert len(fresh.get(ids=[f"m:{room.pk}:shared:0:0"], include=["embeddings"])["embeddings"][0]) == 26
    assert indexing.reindex(building.pk) is False  # already switched: a second run does nothing


@pytest.fixture
def text_utility(host, fake_llm):
    """The host's Utility model is a text-completion server (the fake) on the bundled ChatML template."""
    connection = connection_services.connection_create(
        owner=host,
        name="Fake text utility",
        provider="local",
        model="fake-utility",
        api_base=fake_llm.base_url,
        api="text",
        text_backend="llamacpp",
        instruct_template="bundled:ChatML",
    )
    roles = connection_selectors.model_roles_get(user=host)
    connection_services.model_roles_update(
        user=host, chat=roles.chat, utility=connection, embedding=None, rerank_kind="builtin"
    )
    return connection


def test_a_text_completion_utility_model_gets_the_request_in_its_instruct_template(
    room, text_utility, fake_llm
):
    fake_llm.script(answer())
    story_room(room, 16)
    passes.catch_up(room.pk)
    summary = Summary.objects.get(room=room, tier=0, block=0)
    assert summary.source == Summary.Source.UTILITY
    assert summary.facts == ["The brass key opens the cellar."]
    request, manager = fake_llm.completions()  # the summary, then the memory manager's reading
    assert "Facts kept" in manager.body["prompt"] and '{"operations": [' in manager.body["prompt"]
    assert "tools" not in manager.body  # a text model is asked for the fallback format alone
    prompt = request.body["prompt"]
    system, user = prompt.removeprefix("<|im_start|>system\n").split("<|im_end|>\n<|im_start|>user\n")
    assert "JSON" in system and "<|im_start|>" not in system
    assert "#3 Traveller:" in user
    assert user.endswith("Write the JSON object now.<|im_end|>\n<|im_start|>assistant\n")
    assert request.body["stop"] == [
        "\n<|im_end|>",
        "\n<|im_start|>user",
        "\n<|im_start|>assistant",
        "\n<|im_start|>system",
    ]
    assert "messages" not in request.body
