"""Corpus search through the real services: the database, the Chroma server and the built-in MiniLM."""

from __future__ import annotations

import datetime as dt

import pytest

from corpus import ranking, search
from memory import index, selectors, tasks
from memory.models import Summary
from memory.services import catch_up as passes
from orbchat.connections import services as connection_services
from orbchat.interop.cards import parse_card_json
from orbchat.library import services as library_services
from rooms import members
from rooms import services as room_services
from tests.factories import make_owner, make_user
from tests.library.cards import v2_card
from tests.memory.conftest import story_room

pytestmark = pytest.mark.django_db(transaction=True)

WHO = ["Tobin", "Ilse", "Corwin", "the harbourmaster", "the ferryman", "Old Harrow", "the customs clerk"]
DID = ["mended", "sold", "counted", "painted", "carried", "weighed", "burned", "scrubbed"]
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
WHERE = ["at the market", "on the north pier", "behind the bakery", "in the boathouse", "by the school"]

LIE = "Maren swore she had never touched the brass key, though it hung from her own belt all along."
LIE_AT = 21  # block 2 (messages 16–23)
QUILLON = "We rowed out past the wreck of the Saint Quillon while the gulls screamed."
QUILLON_AT = 45  # block 5 (messages 40–47)


def varied(seq: int) -> str:
    """A different small, dull happening for every message."""
    return (
        f"{WHO[seq % 7]} {DID[seq % 8]} {WHAT[(seq * 3) % 10]} {WHERE[(seq * 5) % 5]}, "
        f"and {WHO[(seq + 3) % 7]} {DID[(seq + 5) % 8]} {WHAT[(seq * 7 + 1) % 10]}."
    )


def story(room, total: int = 72, *, start: dt.datetime | None = None, plant: dict[int, str] | None = None):
    """Fill the room with varied messages (and planted ones), then build its memory and scenes."""
    texts = {seq: varied(seq) for seq in range(total)} | (plant or {})
    story_room(room, total, plant=texts, start=start)
    passes.catch_up(room.pk)
    return room


def covers(hit: search.Hit, seq: int) -> bool:
    return hit.seq_from is not None and hit.seq_from <= seq <= hit.seq_to


def character(owner, name: str):
    return library_services.character_create(
        owner=owner, card=parse_card_json(v2_card(name=name, first_mes=""))
    )


def new_room(host, name: str):
    return room_services.room_create_from_character(host=host, character=character(host, name))


@pytest.fixture(autouse=True)
def fresh_word_indexes():
    search.forget_word_indexes()
    yield
    search.forget_word_indexes()


@pytest.fixture
def host(db):
    return make_owner(username="host")


@pytest.fixture
def room(host):
    return story(new_room(host, "Maren"), plant={LIE_AT: LIE, QUILLON_AT: QUILLON})


# Finding ---------------------------------------------------------------------------------------------


def test_finds_the_planted_moment_by_meaning(host, room):
    dense = ranking.Fusion(method=ranking.DENSE)
    results = search.search(host, target="scenes", q="the night she lied about the key", fusion=dense)
    assert covers(results.hits[0], LIE_AT)
    results = search.search(host, target="scenes", q="the night she lied about the key")
    assert covers(results.hits[0], LIE_AT)


def test_a_near_paraphrase_is_really_close(host, room):
    results = search.search(host, target="scenes", q="Maren insisted she never had the brass key")
    assert covers(results.hits[0], LIE_AT)
    assert results.best_cosine >= ranking.CLOSE_COSINE["scenes"]
    assert results.close and results.notice == ""


def test_finds_the_planted_moment_by_a_rare_word(host, room):
    results = search.search(host, target="scenes", q="quillon")
    hit = results.hits[0]
    assert covers(hit, QUILLON_AT)
    assert results.close  # every word of the query is in the best hit
    assert ("Quillon", True) in hit.marks
    assert "Quillon" in hit.snippet and not hit.snippet.startswith("#")


def test_a_hit_carries_its_room_characters_time_and_score(host, room):
    hit = search.search(host, target="scenes", q="the brass key on her belt").hits[0]
    assert hit.room_id == room.pk and hit.room_title == "Maren"
    assert hit.characters == ["Maren"]
    assert hit.block == LIE_AT // 8 and (hit.seq_from, hit.seq_to) == (16, 23)
    assert isinstance(hit.at, dt.datetime) and hit.at.tzinfo is not None
    assert 0.0 < hit.score <= 1.0
    assert hit.summary_id is None and hit.tier is None
    assert f"#{LIE_AT} " in hit.text and LIE in hit.text


def test_memories_are_searched_with_their_summary_row(host, room):
    results = search.search(host, target="memories", q="the wreck of the Saint Quillon")
    assert results.hits and results.close
    hit = results.hits[0]
    summary = Summary.objects.get(pk=hit.summary_id)
    assert summary.room_id == room.pk and summary.tier == hit.tier
    assert summary.seq_from <= QUILLON_AT <= summary.seq_to
    assert hit.characters == ["Maren"]


def test_nonsense_is_answered_with_the_nearest_and_says_it_is_not_close(host, room):
    results = search.search(host, target="scenes", q="zyxwv blorft quantum chromodynamics lattice")
    assert results.hits  # always the nearest it has
    assert not results.close
    assert results.notice == ""  # `close` says it; the notice is for problems


# Scope ------------------------------------------------------------------------------------------------


def test_another_hosts_room_is_never_returned_even_when_it_matches_better(host, room):
    other = make_user(actor=host, username="other")
    theirs = story(new_room(other, "Quillon"), 32, plant={5: "Quillon Quillon. The Saint Quillon, Quillon!"})
    results = search.search(host, target="scenes", q="Saint Quillon", limit=50)
    assert results.hits and {hit.room_id for hit in results.hits} == {room.pk}
    assert {hit.room_id for hit in search.search(other, target="scenes", q="Saint Quillon").hits} == {
        theirs.pk
    }


def hand_over(room, host, username: str):
    """Make `username` a member, then the host; return them."""
    other = make_user(actor=host, username=username)
    invite = members.invite_user_create(room=room, by=host, username=username)
    members.invite_accept(invite=invite, user=other)
    members.host_offer(room=room, user_id=other.pk)
    members.host_accept(room=room, user=other)
    return other


def test_a_room_the_user_is_only_a_member_of_is_never_returned(host, room):
    hand_over(room, host, "other")
    # Before the worker has moved the room's vectors, the query's room filter leaves them out.
    mine = story(new_room(host, "Ilse"), 32)
    results = search.search(host, target="scenes", q="the wreck of the Saint Quillon", limit=50)
    assert results.hits and {hit.room_id for hit in results.hits} == {mine.pk}
    assert not search.search(host, target="memories", q="Quillon", room_ids=[room.pk]).hits


def test_a_handed_over_room_moves_to_the_new_hosts_index(host, room):
    old_generation = selectors.reading_generation(host)
    ids = selectors.room_vector_ids(room.pk)
    assert index.index_records(old_generation, "scenes", ids[1])
    other = hand_over(room, host, "other")
    assert not search.search(other, target="scenes", q="the wreck of the Saint Quillon").hits
    # What the worker does after the hand-over: index for the new host, forget the old copies.
    passes.catch_up(room.pk)
    tasks.forget_vectors(host.pk, *ids)
    found = search.search(other, target="scenes", q="the wreck of the Saint Quillon")
    assert found.hits and covers(found.hits[0], QUILLON_AT) and found.hits[0].room_id == room.pk
    assert search.search(other, target="memories", q="Quillon", room_ids=[room.pk]).hits
    assert not index.index_records(old_generation, "scenes", ids[1])
    assert not index.index_records(old_generation, "memories", ids[0])


def test_no_index_yet_says_so(db):
    newcomer = make_owner(username="newcomer")
    results = search.search(newcomer, target="scenes", q="anything")
    assert results.hits == [] and results.notice == search.NOT_INDEXED
    story(new_room(newcomer, "Esk"), 6)  # too short to age anything out: an index, but empty
    assert selectors.reading_generation(newcomer) is not None
    assert search.search(newcomer, target="scenes", q="anything").notice == search.NOT_INDEXED


# Filters -------------------------------------------------------------------------------------------------


@pytest.fixture
def two_rooms(host):
    """Two rooms of one host with the same planted line: Maren's in 2023, Tobin's in 2024."""
    first = story(
        new_room(host, "Maren"),
        32,
        start=dt.datetime(2023, 3, 1, tzinfo=dt.UTC),
        plant={QUILLON_AT - 30: QUILLON},
    )
    second = story(
        new_room(host, "Tobin"),
        32,
        start=dt.datetime(2024, 6, 1, tzinfo=dt.UTC),
        plant={QUILLON_AT - 30: QUILLON},
    )
    return first, second


def rooms_of(results: search.Results) -> set[int]:
    return {hit.room_id for hit in results.hits}


def test_the_room_filter_applies(host, two_rooms):
    first, second = two_rooms
    assert rooms_of(search.search(host, target="scenes", q="Quillon", limit=50)) == {first.pk, second.pk}
    assert rooms_of(search.search(host, target="scenes", q="Quillon", room_ids=[second.pk], limit=50)) == {
        second.pk
    }


def test_the_character_filter_applies(host, two_rooms):
    first, second = two_rooms
    tobin = second.seats.get().character
    results = search.search(host, target="scenes", q="Quillon", character_id=tobin.pk, limit=50)
    assert rooms_of(results) == {second.pk}
    assert all(hit.characters == ["Tobin"] for hit in results.hits)


def test_the_date_range_applies(host, two_rooms):
    first, second = two_rooms
    only_2023 = search.search(
        host,
        target="scenes",
        q="Quillon",
        date_from=dt.date(2023, 1, 1),
        date_to=dt.date(2023, 12, 31),
        limit=50,
    )
    assert rooms_of(only_2023) == {first.pk}
    in_2024 = search.search(
        host,
        target="memories",
        q="Quillon",
        date_from=dt.date(2024, 1, 1),
        date_to=dt.date(2024, 12, 31),
        limit=50,
    )
    assert rooms_of(in_2024) == {second.pk}
    assert all(hit.at.year == 2024 for hit in in_2024.hits)
    nothing = search.search(host, target="scenes", q="Quillon", date_to=dt.date(2020, 1, 1))
    assert nothing.hits == [] and nothing.total == 0 and nothing.notice == search.NOTHING


def test_filters_matching_no_room_say_so(host, two_rooms):
    stranger = make_user(actor=host, username="stranger")
    theirs = story(new_room(stranger, "Esk"), 16)
    results = search.search(host, target="scenes", q="Quillon", room_ids=[theirs.pk])
    assert results.hits == [] and results.notice == search.NO_ROOMS


# Paging ---------------------------------------------------------------------------------------------------


def test_pages_follow_one_ranking(host, room):
    everything = search.search(host, target="scenes", q="the harbourmaster and the lemons", limit=8)
    first = search.search(host, target="scenes", q="the harbourmaster and the lemons", limit=3)
    second = search.search(host, target="scenes", q="the harbourmaster and the lemons", offset=3, limit=3)
    keys = [hit.key for hit in everything.hits]
    assert [hit.key for hit in first.hits] == keys[:3]
    assert [hit.key for hit in second.hits] == keys[3:6]
    assert first.total == second.total == everything.total >= 8
    beyond = search.search(host, target="scenes", q="the harbourmaster", offset=first.total, limit=3)
    assert beyond.hits == []


# Staying fresh, and failing politely ---------------------------------------------------------------------


def test_new_scenes_are_found_without_a_restart(host, room):
    assert not search.search(host, target="scenes", q="astrolabe").close
    story_room(room, 96, plant={80: "The astrolabe was wrapped in oilcloth under the altar."})
    passes.catch_up(room.pk)
    results = search.search(host, target="scenes", q="astrolabe")
    assert covers(results.hits[0], 80) and results.close


def test_an_edited_message_is_found_by_its_new_words_only(host, room):
    assert covers(search.search(host, target="scenes", q="Saint Quillon").hits[0], QUILLON_AT)
    room_services.message_edit(message=room.messages.get(seq=QUILLON_AT), text="The wreck was the Marigold.")
    passes.catch_up(room.pk)
    found = search.search(host, target="scenes", q="Marigold")
    assert covers(found.hits[0], QUILLON_AT) and "Marigold" in found.hits[0].text
    assert not any("Quillon" in hit.text for hit in search.search(host, target="scenes", q="Quillon").hits)


def test_warming_builds_the_word_indexes_ahead_of_the_first_search(host, room):
    search.warm(host).result()
    assert {target for _, target in search._corpora} == {"scenes", "memories"}
    assert search.search(host, target="scenes", q="Quillon").timings["word_index"] < 1000
    assert search.warm(make_user(actor=host, username="newcomer")) is None  # no index: nothing to warm


def test_a_broken_embedder_gives_a_notice_and_the_matches_by_words(host, fake_llm):
    remote = connection_services.connection_create(
        owner=host, name="Fake embedder", provider="local", model="fake-embed", api_base=fake_llm.base_url
    )
    connection_services.model_roles_update(
        user=host, chat=None, utility=None, embedding=remote, rerank_kind="builtin"
    )
    story(new_room(host, "Maren"), plant={QUILLON_AT: QUILLON})
    assert selectors.reading_generation(host).model_key.endswith("fake-embed")
    fake_llm.embeddings_status = 500
    results = search.search(host, target="scenes", q="the Saint Quillon")
    assert results.notice.startswith("Matched by words only")
    assert covers(results.hits[0], QUILLON_AT)
    assert results.hits[0].score == 0.0


def test_an_unreachable_vector_store_gives_a_notice(host, room, settings):
    settings.CHROMA_URL = "http://127.0.0.1:9"
    results = search.search(host, target="scenes", q="Quillon")
    assert results.hits == [] and results.notice.startswith("Search is unavailable right now")


def test_an_empty_query_or_unknown_target_asks_again(host, room):
    assert search.search(host, target="scenes", q="  ").notice == search.EMPTY_QUERY
    assert search.search(host, target="people", q="Quillon").notice == search.UNKNOWN_TARGET


def test_the_vector_filter_holds_the_rooms_and_dates():
    assert search.vector_filter([1, 2], None, None) == {"room": {"$in": [1, 2]}}
    assert search.vector_filter([1], 100, 200) == {
        "$and": [{"room": {"$in": [1]}}, {"at": {"$gte": 100}}, {"at": {"$lt": 200}}]
    }
