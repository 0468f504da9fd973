"""Who speaks in a round: pure rules, no database, no services."""

from __future__ import annotations

import random

from rooms.speakers import (
    DEFAULT_AUTO_DELAY,
    DEFAULT_AUTO_TURNS,
    Candidate,
    Order,
    at_mentions,
    auto_continues,
    mentioned,
    pick_speakers,
)

QUIET = 0.0
CHATTY = 1.0


def seats(*names: str, talkativeness: float = QUIET, **flags: dict[str, bool]) -> list[Candidate]:
    """Seat the named characters as ids 1, 2, 3 ...; flags map a name to Candidate overrides."""
    return [
        Candidate(seat_id=i, name=name, talkativeness=talkativeness, **flags.get(name, {}))
        for i, name in enumerate(names, start=1)
    ]


def pick(order: Order | str, candidates: list[Candidate], text: str = "", **kwargs) -> list[int]:
    kwargs.setdefault("from_human", True)
    kwargs.setdefault("last_speaker", None)
    kwargs.setdefault("rng", random.Random(0))
    return pick_speakers(order=order, candidates=candidates, text=text, **kwargs)


# Mentions


def test_whole_word_mention_does_not_match_a_longer_name():
    assert mentioned("Anna, come here.", ["Ann", "Anna"]) == ["Anna"]
    assert mentioned("Is that Ann's hat, @ann?", ["Ann", "Anna"]) == ["Ann"]
    assert mentioned("Joanne waves.", ["Ann"]) == []


def test_mentions_come_in_order_of_first_appearance():
    assert mentioned("Bob saw Ann, then bob again.", ["Ann", "Bob"]) == ["Bob", "Ann"]


def test_multi_word_name_matches_as_a_phrase_only():
    assert mentioned("Hello, old  tom!", ["Old Tom"]) == ["Old Tom"]
    assert mentioned("Tom is here.", ["Old Tom"]) == []


def test_names_with_regex_characters_match_literally():
    assert mentioned("R2-D2 beeps at Dr. Who.", ["R2-D2", "Dr. Who", "D."]) == ["R2-D2", "Dr. Who"]
    assert mentioned("Dr Who", ["Dr. Who"]) == []


def test_at_mention_prefers_the_longer_name():
    names = ["Old", "Old Tom", "Ann"]
    assert at_mentions("@Old Tom and @ann, hi. @Old man", names) == ["Old Tom", "Ann", "Old"]
    assert at_mentions("Ann and @Anna", names) == []
    assert at_mentions("mail tom@ann.net", names) == []


# Natural


def test_mentioned_character_answers_in_mention_order():
    room = seats("Ann", "Bob", "Cid")
    assert pick(Order.NATURAL, room, "Cid, then Ann: what now?") == [3, 1]


def test_talkativeness_one_always_chimes_in_and_zero_never():
    room = [
        Candidate(1, "Ann", talkativeness=CHATTY),
        Candidate(2, "Bob", talkativeness=QUIET),
        Candidate(3, "Cid", talkativeness=CHATTY),
    ]
    for seed in range(20):
        assert sorted(pick(Order.NATURAL, room, "Hello.", rng=random.Random(seed))) == [1, 3]


def test_nobody_chiming_in_falls_back_to_exactly_one():
    room = seats("Ann", "Bob", "Cid")
    picks = {tuple(pick(Order.NATURAL, room, "Hello.", rng=random.Random(seed))) for seed in range(30)}
    assert all(len(p) == 1 for p in picks)
    assert {p[0] for p in picks} == {1, 2, 3}


def test_auto_mode_after_a_character_still_picks_one():
    room = seats("Ann", "Bob", "Cid")
    assert len(pick(Order.NATURAL, room, "Nice weather.", from_human=False, last_speaker=1)) == 1


def test_muted_character_is_never_picked_in_natural():
    room = seats("Ann", "Bob", talkativeness=CHATTY, Bob={"muted": True})
    for seed in range(20):
        assert pick(Order.NATURAL, room, "Bob, speak!", rng=random.Random(seed)) == [1]


def test_last_speaker_sits_out_unless_self_replies_are_allowed():
    room = seats("Ann", "Bob", talkativeness=CHATTY)
    for seed in range(20):
        rng = random.Random(seed)
        assert pick(Order.NATURAL, room, "Well?", last_speaker=1, rng=rng) == [2]
    assert 1 in pick(Order.NATURAL, room, "Well?", last_speaker=1, allow_self_replies=True)


def test_a_person_naming_the_last_speaker_gets_its_answer():
    room = seats("Ann", "Bob", talkativeness=QUIET)
    for seed in range(20):
        assert pick(Order.NATURAL, room, "Ann?", last_speaker=1, rng=random.Random(seed)) == [1]


def test_single_character_still_answers_a_human():
    room = seats("Ann")
    assert pick(Order.NATURAL, room, "Hi.", last_speaker=1) == [1]


def test_single_character_does_not_answer_itself_in_auto_mode():
    room = seats("Ann", "Bob", Bob={"muted": True})
    assert pick(Order.NATURAL, room, "Hmm.", from_human=False, last_speaker=1) == []


def test_character_mention_calls_on_another_but_naming_itself_does_not():
    room = seats("Ann", "Bob", "Cid")
    assert pick(Order.NATURAL, room, "I, Ann, ask Cid.", from_human=False, last_speaker=1) == [3]
    for seed in range(20):
        rng = random.Random(seed)
        result = pick(
            Order.NATURAL,
            room,
            "Ann asks Cid.",
            from_human=False,
            last_speaker=1,
            allow_self_replies=True,
            rng=rng,
        )
        assert result == [3]


def test_character_at_mention_counts_only_as_an_ordinary_mention():
    room = seats("Ann", "Bob", Bob={"muted": True})
    assert pick(Order.NATURAL, room, "@Bob, your turn.", from_human=False, last_speaker=1) == []


# Speak next


def test_speak_next_forces_a_muted_character_and_goes_first():
    room = seats("Ann", "Bob", "Cid", Cid={"muted": True, "speak_next": True})
    for order in Order:
        assert pick(order, room, "Ann?")[0] == 3


def test_no_duplicates_when_named_twice_and_also_speak_next():
    room = seats("Ann", "Bob", talkativeness=CHATTY, Ann={"speak_next": True})
    result = pick(Order.NATURAL, room, "Ann! Ann, and Bob!")
    assert result == [1, 2]


# Everyone and round robin


def test_everyone_speaks_in_seat_order_skipping_muted():
    room = seats("Ann", "Bob", "Cid", "Dee", Bob={"muted": True})
    assert pick(Order.EVERYONE, room, "All of you!", last_speaker=4) == [1, 3, 4]


def test_round_robin_starts_after_the_last_speaker_and_wraps():
    room = seats("Ann", "Bob", "Cid", Bob={"muted": True})
    assert pick(Order.ROUND_ROBIN, room, last_speaker=1) == [3]
    assert pick(Order.ROUND_ROBIN, room, last_speaker=3) == [1]
    assert pick(Order.ROUND_ROBIN, room, last_speaker=2) == [3]


def test_round_robin_without_a_seated_last_speaker_starts_at_the_first_unmuted():
    room = seats("Ann", "Bob", Ann={"muted": True})
    assert pick(Order.ROUND_ROBIN, room, last_speaker=None) == [2]
    assert pick(Order.ROUND_ROBIN, room, last_speaker=99) == [2]


def test_order_may_be_given_as_its_stored_string():
    room = seats("Ann", "Bob")
    assert pick("round_robin", room, last_speaker=1) == [2]


# Manual


def test_manual_speaks_only_when_picked_by_button_or_at_mention():
    room = seats("Ann", "Bob", "Cid", talkativeness=CHATTY, Cid={"muted": True})
    assert pick(Order.MANUAL, room, "Ann, Bob: hello.") == []
    assert pick(Order.MANUAL, room, "@cid and @Bob, hello.", picked=[1, 42]) == [1, 3, 2]


def test_manual_ignores_a_characters_own_at_mention():
    room = seats("Ann", "Bob", "Cid", Cid={"speak_next": True})
    assert pick(Order.MANUAL, room, "@Bob, your turn.", from_human=False, last_speaker=1) == [3]


# Whole rounds


def test_same_seed_gives_the_same_speakers():
    room = [Candidate(i, f"C{i}", talkativeness=0.5) for i in range(1, 9)]
    runs = [pick(Order.NATURAL, room, "Hello all.", rng=random.Random(7)) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    assert len(set(runs[0])) == len(runs[0])


def test_empty_room_has_no_speakers():
    for order in Order:
        assert pick(order, [], "Anyone?", picked=[1]) == []


def test_auto_mode_runs_until_its_round_limit():
    assert auto_continues(rounds_done=0, max_rounds=DEFAULT_AUTO_TURNS)
    assert not auto_continues(rounds_done=DEFAULT_AUTO_TURNS, max_rounds=DEFAULT_AUTO_TURNS)
    assert not auto_continues(rounds_done=0, max_rounds=0)
    assert DEFAULT_AUTO_DELAY > 0


def test_a_first_name_is_enough_to_call_a_character():
    assert mentioned("Maren, are you there?", ["Maren Tallis", "Tobin"]) == ["Maren Tallis"]
    assert mentioned("Tallis?", ["Maren Tallis"]) == []


def test_an_article_or_title_is_not_a_first_name():
    assert mentioned("Take the ferry across.", ["The Ferryman"]) == []
    assert mentioned("Hello, old friend.", ["Old Tom"]) == []
    assert mentioned("The Ferryman waits.", ["The Ferryman"]) == ["The Ferryman"]
