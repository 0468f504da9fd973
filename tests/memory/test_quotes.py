"""Quotes, the pure part: found by words and by meaning, cut at sentence boundaries, labelled."""

from __future__ import annotations

import datetime as dt

from memory.recall import quotes
from memory.recall.quotes import Lexicon, Turn, cut, find, fit, quotes_text

WHEN = dt.datetime(2026, 3, 12, 20, 0, tzinfo=dt.UTC)
FILLER = "The tide came in slowly and the gulls cried over the harbour wall."


def room(texts: dict[int, tuple[str, str]]) -> tuple[dict[int, Turn], Lexicon]:
    turns = {seq: Turn(seq, speaker, text, WHEN) for seq, (speaker, text) in texts.items()}
    lexicon = Lexicon()
    for seq, turn in turns.items():
        lexicon.add(seq, turn.text)
    return turns, lexicon


def chat() -> tuple[dict[int, Turn], Lexicon]:
    texts = {
        seq: ("Maren" if seq % 2 else "Ada", f"{FILLER} We talked about nothing much, {seq}.")
        for seq in range(60)
    }
    texts[7] = (
        "Maren",
        "The storm broke at dusk. I carried the lamp down the steps. "
        "I gave the brass key to Father Quillon at the chapel. He keeps it under the altar stone. "
        "Then we ate bread by the fire and said nothing for an hour. The dog slept.",
    )
    return room(texts)


def test_a_rare_word_finds_the_message_that_said_it_and_the_quote_is_cut_around_it():
    turns, lexicon = chat()
    found = find(
        turns,
        lexicon,
        query=["Where is the brass key now?"],
        cosines={},
        floor=0.35,
        count=4,
        allowed=lambda s: s < 50,
    )
    assert [q.turn.seq for q in found.kept][:1] == [7] or 7 in [q.turn.seq for q in found.kept]
    quote = next(q for q in found.kept if q.turn.seq == 7)
    assert "I gave the brass key to Father Quillon at the chapel." in quote.text
    assert "brass" in quote.matched and "key" in quote.matched
    assert quote.why == quotes.WORDS


def test_a_paraphrase_is_found_by_meaning_when_no_word_is_shared():
    turns, lexicon = chat()
    found = find(
        turns,
        lexicon,
        query=["who got the thing that opens the door?"],
        cosines={7: 0.62, 3: 0.2},
        floor=0.35,
        count=2,
        allowed=lambda s: s < 50,
    )
    kept = {q.turn.seq: q for q in found.kept}
    assert 7 in kept and kept[7].why in (quotes.MEANING, quotes.BOTH)
    assert 3 not in kept  # under the floor, and no rare word in common


def test_messages_still_in_the_prompt_are_never_quoted():
    turns, lexicon = chat()
    found = find(
        turns,
        lexicon,
        query=["the brass key"],
        cosines={7: 0.9},
        floor=0.35,
        count=4,
        allowed=lambda s: s > 10,
    )
    assert 7 not in [q.turn.seq for q in found.kept + found.rejected]


def test_the_count_limits_the_quotes_and_zero_turns_them_off():
    places = ["quay", "lighthouse", "chapel", "market", "ferry", "mill", "school", "tavern"]
    turns, lexicon = room(
        {
            seq: ("Maren", f"The gulls circled the {place} while the {seq + 2} boats came in.")
            for seq, place in enumerate(places)
        }
    )
    many = find(
        turns, lexicon, query=["gulls harbour tide"], cosines={}, floor=0.35, count=4, allowed=lambda s: True
    )
    assert len(many.kept) == 4
    assert (
        find(turns, lexicon, query=["gulls"], cosines={}, floor=0.35, count=0, allowed=lambda s: True).kept
        == []
    )


def test_the_names_of_the_people_in_the_room_find_nothing_by_themselves():
    turns, lexicon = room({1: ("Ada", "Maren waved."), 2: ("Maren", "The lantern is lit.")})
    found = find(
        turns,
        lexicon,
        query=["Maren?"],
        cosines={},
        floor=0.35,
        count=4,
        allowed=lambda s: True,
        ignore=frozenset({"maren"}),
    )
    assert found.kept == []


def test_a_cut_never_ends_mid_sentence_and_keeps_the_sentence_before():
    text = (
        " ".join(f"Sentence {n} is about the weather and the sea today." for n in range(12))
        + " The key is under the altar stone."
    )
    passage = cut(text, {"key", "altar"}, lambda term: 2.0, limit=25)
    assert passage.endswith("The key is under the altar stone.")
    assert passage.startswith("Sentence 11 is")  # its neighbour before, whole
    assert len(passage.split()) <= 25


def test_a_short_message_is_quoted_whole():
    assert (
        cut("Yes. *She nods.* The ferry leaves at six.", {"ferry"}, lambda t: 1.0)
        == "Yes. *She nods.* The ferry leaves at six."
    )


def test_quotes_are_labelled_with_who_and_when_under_the_caveat():
    turns, lexicon = chat()
    found = find(turns, lexicon, query=["brass key"], cosines={}, floor=0.35, count=1, allowed=lambda s: True)
    text = quotes_text(found.kept)
    assert text.splitlines()[0] == quotes.HEADING
    assert "may have been a plan, a belief or a lie" in text
    assert text.splitlines()[1].startswith('[Maren, 12 Mar 2026, message 7] "')


def test_quotes_fit_in_what_the_budget_leaves_best_first():
    turns, lexicon = chat()
    found = find(
        turns, lexicon, query=["brass key gulls"], cosines={}, floor=0.35, count=4, allowed=lambda s: True
    )
    words = lambda text: len(text.split())  # noqa: E731
    budget = words(quotes.HEADING) + words(found.kept[0].line) + 1
    kept, cut_out = fit(found.kept, budget=budget, count=words)
    assert len(kept) == 1 and len(cut_out) == len(found.kept) - 1
    assert kept[0].score == max(q.score for q in found.kept)


def test_a_removed_message_leaves_the_statistics():
    turns, lexicon = room({1: ("Ada", "The brass key."), 2: ("Maren", "A brass bell.")})
    lexicon.remove(1)
    assert set(lexicon.scores({"key": 1.0}, lambda s: True)) == set()
    assert set(lexicon.scores({"brass": 1.0}, lambda s: True)) == {2}


def test_a_chats_refrain_fills_one_quote_not_all_of_them():
    texts = {seq: ("Maren", f"The kettle is singing again, love. {FILLER}") for seq in range(40)}
    texts[5] = ("Ada", "The kettle is singing, and the brass key is under the altar stone.")
    turns, lexicon = room(texts)
    found = find(
        turns,
        lexicon,
        query=["Is the kettle singing again?"],
        cosines={seq: 0.6 for seq in range(40)},
        floor=0.35,
        count=4,
        allowed=lambda s: s < 30,
    )
    texts_kept = [q.text for q in found.kept]
    assert len(texts_kept) == len(set(texts_kept)) == 2  # the refrain once, and the one that differs
    assert any("brass key" in text for text in texts_kept)


def test_a_passage_the_recent_messages_already_say_is_not_quoted():
    turns, lexicon = room(
        {1: ("Maren", "The gulls cried over the harbour wall."), 2: ("Ada", "Bread again.")}
    )
    found = find(
        turns,
        lexicon,
        query=["The gulls cried over the harbour wall, didn't they?"],
        cosines={1: 0.9},
        floor=0.35,
        count=4,
        allowed=lambda s: True,
    )
    assert found.kept == []


def test_a_message_is_cut_into_sentences_for_the_meaning_route_short_ones_joined():
    text = "Hm. *nods* I hid the silver astrolabe in the crypt. The bells rang twice that night. Go on."
    assert quotes.passages(text) == [
        "Hm. *nods* I hid the silver astrolabe in the crypt.",
        "The bells rang twice that night. Go on.",
    ]
    assert quotes.passages("Thanks!") == ["Thanks!"]
    assert quotes.passages("") == []
