from __future__ import annotations

import json
import random
import re
import time

from orbchat.prompting.worldinfo import (
    Book,
    Entry,
    Logic,
    Position,
    Settings,
    TimedEffect,
    TimedState,
    activate,
    default_count_tokens,
    parse_regex_key,
)


def lore(*entries: Entry, **settings) -> Book:
    settings.setdefault("id", 1)
    settings.setdefault("name", "Lore")
    return Book(entries=tuple(entries), **settings)


def run(books: Book | list[Book], *messages: str, seed: int = 0, **kwargs):
    books = [books] if isinstance(books, Book) else books
    return activate(books, list(messages), rng=random.Random(seed), **kwargs)


def uids(result) -> list[int]:
    return [a.entry.uid for a in result.activated]


def reasons(result) -> dict[int, str]:
    return {a.entry.uid: a.reason for a in result.activated}


# --- 1. disabled and constant entries -----------------------------------------------------------


def test_disabled_entry_never_activates():
    book = lore(
        Entry(1, keys=("dragon",), enabled=False),
        Entry(2, constant=True, enabled=False),
    )
    result = run(book, "a dragon")
    assert result.activated == []
    assert result.rejected == {}


def test_constant_entry_activates_without_keys():
    result = run(lore(Entry(1, constant=True, content="Always here.")), "nothing relevant")
    assert uids(result) == [1]
    assert reasons(result) == {1: "constant"}


def test_constant_entry_still_rolls_probability():
    result = run(lore(Entry(1, constant=True, probability=0)), "anything")
    assert result.activated == []
    assert result.rejected == {(1, 1): "probability roll failed"}


# --- 2. primary keys ----------------------------------------------------------------------------


def test_any_primary_key_activates_the_entry():
    book = lore(Entry(1, keys=("wyrm", "dragon", "drake")))
    assert uids(run(book, "the dragon sleeps")) == [1]
    assert reasons(run(book, "the dragon sleeps")) == {1: 'key "dragon" in message 1'}


def test_entry_without_keys_never_matches_unless_constant():
    book = lore(Entry(1), Entry(2, keys=("",)), Entry(3, constant=True))
    assert uids(run(book, "anything at all")) == [3]


def test_key_of_only_blanks_is_the_empty_needle_and_always_matches():
    # SillyTavern trims the key after checking it is non-empty, then finds "" everywhere.
    assert uids(run(lore(Entry(1, keys=("  ",))), "anything at all")) == [1]


# --- 3. matching --------------------------------------------------------------------------------


def test_plain_key_is_a_substring_match_without_whole_words():
    book = lore(Entry(1, keys=("dragon",)), match_whole_words=False)
    assert uids(run(book, "a dragonfly")) == [1]


def test_whole_words_requires_word_boundaries():
    book = lore(Entry(1, keys=("dragon",)))
    assert uids(run(book, "a dragonfly")) == []
    assert uids(run(book, "a dragon, flying")) == [1]
    assert uids(run(book, "dragon")) == [1]


def test_whole_words_key_with_punctuation_uses_boundaries():
    book = lore(Entry(1, keys=("sci-fi",)))
    assert uids(run(book, "I like sci-fi.")) == [1]
    assert uids(run(book, "I like sci-fiction")) == []


def test_whole_words_key_with_spaces_falls_back_to_substring():
    book = lore(Entry(1, keys=("red dragon",)))
    assert uids(run(book, "the red dragonfly")) == [1]


def test_entry_whole_words_overrides_book():
    book = lore(Entry(1, keys=("dragon",), match_whole_words=False))
    assert uids(run(book, "a dragonfly")) == [1]
    book = lore(Entry(1, keys=("dragon",), match_whole_words=True), match_whole_words=False)
    assert uids(run(book, "a dragonfly")) == []


def test_matching_ignores_case_unless_case_sensitive():
    assert uids(run(lore(Entry(1, keys=("Dragon",))), "DRAGON!")) == [1]
    assert uids(run(lore(Entry(1, keys=("Dragon",)), case_sensitive=True), "DRAGON!")) == []
    assert uids(run(lore(Entry(1, keys=("Dragon",)), case_sensitive=True), "a Dragon!")) == [1]
    entry = Entry(1, keys=("Dragon",), case_sensitive=True)
    assert uids(run(lore(entry), "dragon")) == []
    entry = Entry(1, keys=("Dragon",), case_sensitive=False)
    assert uids(run(lore(entry, case_sensitive=True), "dragon")) == [1]


def test_case_sensitive_substring_and_punctuated_keys():
    book = lore(Entry(1, keys=("Sci-Fi",)), Entry(2, keys=("Red Dragon",)), case_sensitive=True)
    assert uids(run(book, "sci-fi and red dragon")) == []
    assert sorted(uids(run(book, "Sci-Fi and Red Dragon"))) == [1, 2]


def test_long_messages_still_match_substring_and_punctuated_keys():
    filler = "The road winds past quiet hills and grey rivers. " * 40
    book = lore(
        Entry(1, keys=("Red Dragon",)),
        Entry(2, keys=("sci-fi",)),
        Entry(3, keys=("ice-wyrm",)),
        Entry(4, keys=("grey rivers",), case_sensitive=True),
        Entry(5, keys=("Grey Rivers",), case_sensitive=True),
    )
    result = run(book, filler + "A red dragon reads sci-fi." + filler)
    assert sorted(uids(result)) == [1, 2, 4]


def test_regex_key_case_comes_from_its_flags_only():
    book = lore(Entry(1, keys=("/drag.n/",)))
    assert uids(run(book, "DRAGON")) == []
    assert uids(run(book, "dragon")) == [1]
    assert uids(run(lore(Entry(1, keys=("/drag.n/i",))), "DRAGON")) == [1]
    book = lore(Entry(1, keys=("/drag.n/i",)), case_sensitive=True)
    assert uids(run(book, "DRAGON")) == [1]


def test_regex_key_ignores_whole_words():
    book = lore(Entry(1, keys=("/drag/",)))
    assert uids(run(book, "dragonfly")) == [1]
    assert reasons(run(book, "dragonfly")) == {1: 'key "/drag/" in message 1'}


def test_parse_regex_key_maps_flags_and_rejects_the_rest():
    assert parse_regex_key("/a.b/x") is None  # not a JavaScript flag
    pattern = parse_regex_key("/a.b/gims")
    assert pattern is not None
    assert pattern.pattern == "a.b"
    assert pattern.flags & re.IGNORECASE and pattern.flags & re.MULTILINE
    assert pattern.flags & re.DOTALL
    assert parse_regex_key("/a\\/b/u").search("a/b")
    assert parse_regex_key("/x/") is not None and not parse_regex_key("/x/").flags & re.IGNORECASE
    assert parse_regex_key("dragon") is None
    assert parse_regex_key("/usr/bin") is None  # "bin" is not a set of flags
    assert parse_regex_key("//") is None
    assert parse_regex_key("/[unclosed/") is None


# --- 4. secondary keys --------------------------------------------------------------------------


def selective(logic: Logic, secondary: tuple[str, ...] = ("cave", "gold")) -> Book:
    return lore(Entry(1, keys=("dragon",), secondary_keys=secondary, selective_logic=logic))


def test_and_any_needs_one_secondary_key():
    assert uids(run(selective(Logic.AND_ANY), "dragon")) == []
    assert uids(run(selective(Logic.AND_ANY), "dragon in a cave")) == [1]


def test_not_all_rejects_only_when_every_secondary_key_appears():
    assert uids(run(selective(Logic.NOT_ALL), "dragon in a cave")) == [1]
    assert uids(run(selective(Logic.NOT_ALL), "dragon")) == [1]
    assert uids(run(selective(Logic.NOT_ALL), "dragon, cave and gold")) == []


def test_not_any_rejects_when_a_secondary_key_appears():
    assert uids(run(selective(Logic.NOT_ANY), "dragon")) == [1]
    assert uids(run(selective(Logic.NOT_ANY), "dragon with gold")) == []


def test_and_all_needs_every_secondary_key():
    assert uids(run(selective(Logic.AND_ALL), "dragon in a cave")) == []
    assert uids(run(selective(Logic.AND_ALL), "dragon, cave and gold")) == [1]


def test_secondary_keys_need_the_primary_key():
    assert uids(run(selective(Logic.NOT_ANY), "an empty cave")) == []


def test_secondary_keys_ignored_when_not_selective():
    entry = Entry(1, keys=("dragon",), secondary_keys=("cave",), selective=False)
    assert uids(run(lore(entry), "dragon")) == [1]


def test_selective_without_secondary_keys_needs_only_the_primary():
    assert uids(run(selective(Logic.AND_ALL, ()), "dragon")) == [1]


# --- 5. scan depth ------------------------------------------------------------------------------


def test_scan_depth_only_scans_newest_messages():
    book = lore(Entry(1, keys=("dragon",)), scan_depth=2)
    assert uids(run(book, "dragon", "hello", "bye")) == []
    assert uids(run(book, "hello", "dragon", "bye")) == [1]


def test_entry_scan_depth_overrides_book():
    book = lore(Entry(1, keys=("dragon",), scan_depth=3), Entry(2, keys=("dragon",)), scan_depth=1)
    assert uids(run(book, "dragon", "hello", "bye")) == [1]


def test_scan_depth_zero_scans_nothing_not_even_extra_text():
    book = lore(Entry(1, keys=("dragon",)), Entry(2, keys=("keeper",)), scan_depth=0)
    result = run(book, "a dragon", extra_scan_text=["The keeper of the light."])
    assert uids(result) == []


def test_extra_scan_text_is_scanned_with_the_messages():
    entry = Entry(1, keys=("dragon",), secondary_keys=("keeper",))
    result = run(lore(entry), "a dragon", extra_scan_text=["The keeper."])
    assert uids(result) == [1]


def test_reason_names_the_newest_message_with_the_key():
    book = lore(Entry(1, keys=("dragon",)), scan_depth=5)
    result = run(book, "dragon", "a dragon again", "hello", message_count=12)
    assert reasons(result) == {1: 'key "dragon" in message 11'}


# --- 6. probability -----------------------------------------------------------------------------


def test_probability_zero_never_activates():
    result = run(lore(Entry(1, keys=("dragon",), probability=0)), "dragon")
    assert result.activated == []
    assert result.rejected == {(1, 1): "probability roll failed"}


def test_probability_rolls_with_the_injected_rng():
    book = lore(*(Entry(uid, keys=("dragon",), probability=40) for uid in range(50)))
    rolls = random.Random(3)
    expected = [uid for uid in range(50) if rolls.random() * 100 < 40]
    result = run(book, "dragon", seed=3)
    assert sorted(uids(result)) == expected
    assert 0 < len(expected) < 50
    failed = set(range(50)) - set(expected)
    assert result.rejected == {(1, uid): "probability roll failed" for uid in failed}


def test_probability_ignored_when_use_probability_is_off():
    entry = Entry(1, keys=("dragon",), probability=0, use_probability=False)
    assert uids(run(lore(entry), "dragon")) == [1]


def test_default_rng_is_fresh_each_call():
    book = lore(*(Entry(uid, keys=("dragon",), probability=50) for uid in range(200)))
    first = activate([book], ["dragon"])
    second = activate([book], ["dragon"])
    assert uids(first) != uids(second)


# --- 7. recursion -------------------------------------------------------------------------------


def chain(length: int, **entry_fields) -> list[Entry]:
    """Entry i is keyed "k{i}" and mentions "k{i+1}"."""
    return [Entry(i, keys=(f"k{i}",), content=f"see k{i + 1}", **entry_fields) for i in range(length)]


def test_recursion_activates_entries_named_in_activated_content():
    book = lore(
        Entry(1, keys=("dragon",), content="The dragon lives in the castle."),
        Entry(2, keys=("castle",), content="Stone walls."),
    )
    result = run(book, "a dragon appears")
    assert reasons(result) == {1: 'key "dragon" in message 1', 2: 'recursion: key "castle" in entry 1'}


def test_recursion_can_supply_the_secondary_key():
    book = lore(
        Entry(1, keys=("castle",), content="A deep moat."),
        Entry(2, keys=("castle",), secondary_keys=("moat",)),
    )
    result = run(book, "the castle")
    assert reasons(result) == {
        1: 'key "castle" in message 1',
        2: 'key "castle" in message 1 at recursion level 1',
    }


def test_recursion_off_scans_only_the_messages():
    book = lore(*chain(3), recursive=False)
    assert uids(run(book, "k0")) == [0]


def test_recursion_reaches_only_recursive_books():
    source = lore(Entry(1, keys=("dragon",), content="castle"), id=1)
    closed = lore(Entry(2, keys=("castle",)), id=2, name="Closed", recursive=False)
    open_ = lore(Entry(3, keys=("castle",)), id=3, name="Open")
    result = run([source, closed, open_], "dragon")
    assert {(a.book_id, a.entry.uid) for a in result.activated} == {(1, 1), (3, 3)}


def test_non_recursive_book_content_is_not_scanned():
    source = lore(Entry(1, keys=("dragon",), content="castle"), id=1, recursive=False)
    target = lore(Entry(2, keys=("castle",)), id=2)
    assert uids(run([source, target], "dragon")) == [1]


def test_prevent_recursion_content_is_not_scanned():
    book = lore(
        Entry(1, keys=("dragon",), content="castle", prevent_recursion=True),
        Entry(2, keys=("castle",)),
    )
    assert uids(run(book, "dragon")) == [1]


def test_exclude_recursion_entry_is_not_activated_by_recursion():
    book = lore(
        Entry(1, keys=("dragon",), content="castle"),
        Entry(2, keys=("castle",), exclude_recursion=True),
    )
    assert uids(run(book, "dragon")) == [1]
    assert sorted(uids(run(book, "dragon at the castle"))) == [1, 2]


def test_delay_until_recursion_stays_off_when_nothing_recurses():
    book = lore(Entry(1, keys=("dragon",), delay_until_recursion=1))
    result = run(book, "dragon")
    assert result.activated == []
    assert result.rejected == {(1, 1): "delayed until recursion level 1"}


def test_a_higher_delay_level_gets_its_own_pass_which_opens_lower_levels_too():
    # SillyTavern runs one recursion pass per remaining delay level even when nothing recursed.
    book = lore(
        Entry(1, keys=("dragon",), delay_until_recursion=1),
        Entry(2, keys=("dragon",), delay_until_recursion=2),
    )
    result = run(book, "dragon")
    assert reasons(result) == {
        2: 'key "dragon" in message 1 at recursion level 1',
        1: 'key "dragon" in message 1 at recursion level 1',
    }
    assert run(lore(*book.entries, max_recursion_steps=1), "dragon").activated == []


def test_delay_until_recursion_entry_can_be_triggered_by_recursion():
    book = lore(
        Entry(1, keys=("dragon",), content="castle"),
        Entry(2, keys=("castle",), delay_until_recursion=2),
        Entry(3, keys=("castle",), delay_until_recursion=1),
    )
    result = run(book, "dragon")
    assert uids(result) == [2, 3, 1]  # equal orders: the later-activated entry first
    assert reasons(result)[2] == 'recursion: key "castle" in entry 1'


def test_delay_until_recursion_needs_a_recursive_book():
    book = lore(Entry(1, keys=("dragon",), delay_until_recursion=1), recursive=False)
    result = run(book, "dragon")
    assert result.activated == []
    assert result.rejected == {(1, 1): "delayed until recursion level 1"}


def test_max_recursion_steps_counts_the_first_scan():
    assert uids(run(lore(*chain(5), max_recursion_steps=1), "k0")) == [0]
    assert uids(run(lore(*chain(5), max_recursion_steps=2), "k0")) == [1, 0]
    assert uids(run(lore(*chain(5)), "k0")) == [4, 3, 2, 1, 0]


def test_max_recursion_steps_is_the_highest_among_books():
    first = lore(*chain(3), id=1, max_recursion_steps=1)
    second = lore(Entry(9, keys=("k3",)), id=2, max_recursion_steps=3)
    assert uids(run([first, second], "k0")) == [2, 1, 0]


def test_unlimited_recursion_runs_until_nothing_new_fires():
    # SillyTavern has no cap: a pass only follows one that activated something new.
    assert sorted(uids(run(lore(*chain(30)), "k0"))) == list(range(30))
    assert sorted(uids(run(lore(*chain(30), max_recursion_steps=25), "k0"))) == list(range(25))


def test_minimum_activations_reach_deep_into_a_long_chat():
    # Each deeper message is a pass of its own; however many, they all run.
    book = lore(Entry(1, keys=("dragon",)), scan_depth=1)
    messages = ["dragon", *(f"line {i}" for i in range(30))]
    assert uids(run(book, *messages, settings=Settings(min_activations=1))) == [1]


def test_recursion_stops_when_entries_mention_each_other():
    book = lore(Entry(1, keys=("sun",), content="moon"), Entry(2, keys=("moon",), content="sun"))
    assert sorted(uids(run(book, "sun"))) == [1, 2]


# --- 8. inclusion groups ------------------------------------------------------------------------


def test_inclusion_group_keeps_one_entry():
    book = lore(*(Entry(uid, keys=("dragon",), group="weather") for uid in (1, 2, 3)))
    result = run(book, "dragon")
    assert len(result.activated) == 1
    winner = result.activated[0].entry.uid
    assert result.rejected == {
        (1, uid): f'lost inclusion group "weather" to entry {winner}' for uid in {1, 2, 3} - {winner}
    }


def test_group_weight_drives_the_weighted_pick():
    book = lore(
        Entry(1, keys=("dragon",), group="g", group_weight=0),
        Entry(2, keys=("dragon",), group="g", group_weight=100),
    )
    assert {uids(run(book, "dragon", seed=seed))[0] for seed in range(30)} == {2}
    even = lore(Entry(1, keys=("dragon",), group="g"), Entry(2, keys=("dragon",), group="g"))
    assert {uids(run(even, "dragon", seed=seed))[0] for seed in range(30)} == {1, 2}


def test_group_override_highest_order_wins():
    book = lore(
        Entry(1, keys=("dragon",), group="g", order=900),
        Entry(2, keys=("dragon",), group="g", order=10, group_override=True),
        Entry(3, keys=("dragon",), group="g", order=50, group_override=True),
    )
    result = run(book, "dragon")
    assert uids(result) == [3]
    assert result.rejected[(1, 1)] == 'lost inclusion group "g" to entry 3'


def test_entry_may_belong_to_several_groups():
    book = lore(
        Entry(1, keys=("dragon",), group="weather,  mood", group_override=True),
        Entry(2, keys=("dragon",), group="weather"),
        Entry(3, keys=("dragon",), group="mood"),
        Entry(4, keys=("dragon",), group="other"),
    )
    result = run(book, "dragon", settings=Settings(max_recursion_steps=1))
    assert uids(result) == [4, 1]
    assert result.rejected == {
        (1, 2): 'lost inclusion group "weather" to entry 1',
        (1, 3): 'lost inclusion group "mood" to entry 1',
    }


def test_group_names_split_on_comma_and_following_blanks_only():
    # " weather " keeps its outer blanks, so it is not the group "weather".
    book = lore(
        Entry(1, keys=("dragon",), group=" weather ", group_override=True),
        Entry(2, keys=("dragon",), group="weather"),
    )
    assert sorted(uids(run(book, "dragon"))) == [1, 2]


def test_a_loser_of_a_multi_group_entry_returns_in_the_next_pass():
    # SillyTavern's "group already active" test compares the winner's whole group text.
    book = lore(
        Entry(1, keys=("dragon",), group="weather,mood", group_override=True),
        Entry(2, keys=("dragon",), group="mood"),
    )
    assert uids(run(book, "dragon")) == [2, 1]


def test_constant_entries_are_subject_to_groups():
    book = lore(
        Entry(1, constant=True, group="g"),
        Entry(2, keys=("dragon",), group="g", group_override=True),
    )
    result = run(book, "dragon")
    assert uids(result) == [2]
    assert result.rejected == {(1, 1): 'lost inclusion group "g" to entry 2'}


def test_group_winner_from_an_earlier_step_beats_later_members():
    book = lore(
        Entry(1, keys=("dragon",), content="castle", group="g"),
        Entry(2, keys=("castle",), group="g", group_override=True),
    )
    result = run(book, "dragon")
    assert uids(result) == [1]
    assert result.rejected == {(1, 2): 'lost inclusion group "g" to entry 1, active already'}


def test_group_scoring_prefers_more_matching_keys():
    book = lore(
        Entry(1, keys=("dragon",), group="g", use_group_scoring=True, group_override=True),
        Entry(2, keys=("dragon", "cave"), group="g", use_group_scoring=True),
    )
    result = run(book, "a dragon in a cave")
    assert uids(result) == [2]
    assert result.rejected == {(1, 1): 'lost inclusion group "g" to entry 2, which matched more keys'}


def test_group_scoring_can_be_turned_on_for_every_entry():
    book = lore(Entry(1, keys=("dragon",), group="g"), Entry(2, keys=("dragon", "cave"), group="g"))
    result = run(book, "a dragon in a cave", settings=Settings(use_group_scoring=True))
    assert uids(result) == [2]


def test_groups_are_shared_across_books():
    first = lore(Entry(1, keys=("dragon",), group="g"), id=1)
    second = lore(Entry(1, keys=("dragon",), group="g", group_override=True), id=2)
    result = run([first, second], "dragon")
    assert [(a.book_id, a.entry.uid) for a in result.activated] == [(2, 1)]


def test_sticky_entry_wins_its_inclusion_group():
    book = lore(
        Entry(1, keys=("dragon",), group="g", sticky=3),
        Entry(2, keys=("dragon",), group="g", group_override=True),
    )
    state = TimedState({(1, 1): TimedEffect(activated_at=10, sticky_until=13)})
    result = run(book, "dragon", message_count=11, state=state)
    assert uids(result) == [1]
    assert result.rejected == {(1, 2): 'lost inclusion group "g" to sticky entry 1'}


# --- 9. token budget ----------------------------------------------------------------------------


def test_token_budget_fills_by_order_without_favouring_constants():
    book = lore(
        Entry(1, constant=True, order=1, content="aaaa"),
        Entry(2, keys=("dragon",), order=200, content="bbbb"),
        Entry(3, keys=("dragon",), order=150, content="cccc"),
        token_budget=10,
    )
    result = run(book, "dragon", count_tokens=len)
    # "bbbb\n" is 5 < 10; adding "cccc\n" reaches 10, and reaching the budget overflows it.
    assert uids(result) == [2]
    assert set(result.rejected) == {(1, 1), (1, 3)}


def test_token_budget_stops_at_the_first_entry_that_overflows():
    book = lore(
        Entry(1, keys=("dragon",), order=300, content="aaaaaaaa"),
        Entry(2, keys=("dragon",), order=200, content="bbbbbbbb"),
        Entry(3, keys=("dragon",), order=100, content="c"),
        token_budget=10,
    )
    result = run(book, "dragon", count_tokens=len)
    assert uids(result) == [1]
    assert set(result.rejected) == {(1, 2), (1, 3)}


def test_token_budget_zero_is_unlimited():
    book = lore(*(Entry(uid, keys=("dragon",), content="x" * 1000) for uid in range(20)))
    assert len(run(book, "dragon").activated) == 20


def test_token_budget_is_shared_by_all_books():
    first = lore(Entry(1, keys=("dragon",), content="x" * 100), id=1)
    second = lore(Entry(1, keys=("dragon",), content="x" * 100), id=2)
    result = run([first, second], "dragon", settings=Settings(token_budget=30))
    assert [a.book_id for a in result.activated] == [1]
    assert result.rejected == {(2, 1): "over the world-info token budget"}


def test_over_budget_content_does_not_recurse():
    book = lore(
        Entry(1, keys=("dragon",), content="castle " * 40),
        Entry(2, keys=("castle",)),
        token_budget=5,
    )
    assert uids(run(book, "dragon")) == []


def test_default_token_count_is_a_quarter_of_the_characters():
    assert default_count_tokens("") == 0
    assert default_count_tokens("abc") == 1
    assert default_count_tokens("x" * 40) == 10


# --- 10. timed effects --------------------------------------------------------------------------


def test_delay_blocks_until_message_count():
    book = lore(Entry(1, keys=("dragon",), delay=5))
    early = run(book, "dragon", message_count=4)
    assert early.activated == []
    assert early.rejected == {(1, 1): "delayed until message 5"}
    assert uids(run(book, "dragon", message_count=5)) == [1]


def test_sticky_keeps_entry_active_without_keys():
    book = lore(Entry(1, keys=("dragon",), sticky=2))
    first = run(book, "dragon", message_count=10)
    assert uids(first) == [1]
    second = run(book, "quiet", message_count=11, state=first.state)
    assert reasons(second) == {1: "sticky (1 more message)"}
    third = run(book, "quiet", message_count=12, state=second.state)
    assert third.activated == []


def test_sticky_entries_skip_probability():
    book = lore(Entry(1, keys=("dragon",), sticky=3, probability=0))
    state = TimedState({(1, 1): TimedEffect(activated_at=10, sticky_until=13)})
    result = run(book, "quiet", message_count=11, state=state)
    assert reasons(result) == {1: "sticky (2 more messages)"}


def test_cooldown_blocks_after_activation():
    book = lore(Entry(1, keys=("dragon",), cooldown=2))
    first = run(book, "dragon", message_count=10)
    second = run(book, "dragon", message_count=11, state=first.state)
    assert second.activated == []
    assert second.rejected == {(1, 1): "cooldown (1 more message)"}
    third = run(book, "dragon", message_count=12, state=second.state)
    assert uids(third) == [1]


def test_cooldown_starts_after_sticky_ends():
    book = lore(Entry(1, keys=("dragon",), sticky=2, cooldown=2))
    state = run(book, "dragon", message_count=10).state
    assert reasons(run(book, "dragon", message_count=11, state=state)) == {1: "sticky (1 more message)"}
    blocked = run(book, "dragon", message_count=12, state=state)
    assert blocked.rejected == {(1, 1): "cooldown (2 more messages)"}
    later = run(book, "dragon", message_count=13, state=state)
    assert later.rejected == {(1, 1): "cooldown (1 more message)"}
    assert uids(run(book, "dragon", message_count=14, state=state)) == [1]


def test_activation_at_the_same_message_count_does_not_block_itself():
    book = lore(Entry(1, keys=("dragon",), cooldown=5))
    first = run(book, "dragon", message_count=10)
    assert uids(run(book, "dragon", message_count=10, state=first.state)) == [1]
    assert uids(run(book, "dragon", message_count=8, state=first.state)) == [1]


def test_activate_does_not_mutate_the_passed_state():
    book = lore(Entry(1, keys=("dragon",), cooldown=3), Entry(2, keys=("castle",), sticky=2))
    state = TimedState({(1, 1): TimedEffect(activated_at=5, cooldown_until=9)})
    before = state.to_json()
    result = run(book, "castle", message_count=10, state=state)
    assert state.to_json() == before
    assert result.state is not state
    assert set(result.state.effects) == {(1, 2)}


def test_timed_state_round_trips_through_json():
    book = lore(Entry(1, keys=("dragon",), sticky=2, cooldown=3), Entry(2, keys=("dragon",), cooldown=1))
    state = run(book, "dragon", message_count=10).state
    text = json.dumps(state.to_json())
    restored = TimedState.from_json(json.loads(text))
    assert restored == state
    assert TimedState.from_json(text) == state
    assert restored.effects[(1, 1)] == TimedEffect(activated_at=10, sticky_until=12, cooldown_until=15)
    assert TimedState.from_json(None) == TimedState()
    assert TimedState.from_json({"effects": [{"book_id": 1}]}) == TimedState()


def test_finished_effects_are_dropped_from_the_state():
    book = lore(Entry(1, keys=("dragon",), cooldown=2))
    state = run(book, "dragon", message_count=10).state
    assert run(book, "quiet", message_count=11, state=state).state.effects
    assert run(book, "quiet", message_count=12, state=state).state.effects == {}


# --- 11. output order ---------------------------------------------------------------------------


def test_output_is_grouped_by_position_then_order_later_activated_first():
    book = lore(
        Entry(1, keys=("dragon",), position=Position.AFTER_CHAR, order=5),
        Entry(2, keys=("dragon",), position=Position.BEFORE_CHAR, order=300),
        Entry(3, keys=("dragon",), position=Position.BEFORE_CHAR, order=100),
        Entry(4, keys=("dragon",), position=Position.BEFORE_CHAR, order=100),
        Entry(5, keys=("dragon",), position=Position.AT_DEPTH, order=1, depth=2, role=1),
    )
    result = run(book, "dragon")
    assert uids(result) == [4, 3, 2, 1, 5]
    assert result.activated[-1].entry.depth == 2 and result.activated[-1].entry.role == 1


# --- 12. regex safety ---------------------------------------------------------------------------


def test_catastrophic_regex_times_out_without_hanging():
    book = lore(Entry(1, keys=("/(a|aa)+$/",)), Entry(2, keys=("/(a|aa)+$/", "aaa")), match_whole_words=False)
    started = time.monotonic()
    result = run(book, "a" * 5000 + "b", regex_timeout=0.05)
    assert time.monotonic() - started < 5
    assert uids(result) == [2]
    assert result.rejected == {(1, 1): "regex key timed out"}


def test_slow_regex_runs_once_per_text_however_many_entries_share_it():
    entries = [Entry(uid, keys=("/(a|aa)+$/",), case_sensitive=bool(uid % 2)) for uid in range(20)]
    started = time.monotonic()
    result = run(lore(*entries), "a" * 5000 + "b", regex_timeout=0.1)
    assert time.monotonic() - started < 1.0
    assert set(result.rejected.values()) == {"regex key timed out"}


def test_invalid_regex_never_matches_or_raises():
    book = lore(Entry(1, keys=("/[unclosed/",)), Entry(2, keys=("/(oops/", "/ok/")))
    result = run(book, "[unclosed (oops ok")
    assert uids(result) == [2]
    assert result.rejected == {}


def test_regex_key_supports_javascript_named_groups():
    assert uids(run(lore(Entry(1, keys=("/(?<beast>drag)on/",))), "dragon")) == [1]


# --- 13. determinism ----------------------------------------------------------------------------


def test_same_seed_gives_the_same_result():
    entries = [
        Entry(uid, keys=("dragon",), probability=50, group=f"g{uid % 5}", content=f"lore {uid}")
        for uid in range(100)
    ]
    book = lore(*entries)
    first = run(book, "dragon", seed=42)
    second = run(book, "dragon", seed=42)
    assert first.activated == second.activated
    assert first.rejected == second.rejected
    assert first.activated != run(book, "dragon", seed=43).activated


# --- performance --------------------------------------------------------------------------------


def test_ten_thousand_entries_activate_the_right_matches():
    words = random.Random(1)
    filler = ["the", "old", "road", "winds", "past", "quiet", "hills", "and", "rivers", "under", "grey"]
    wanted = {17, 4242, 9999}
    messages = []
    for index in range(5):
        text = [words.choice(filler) for _ in range(500)]
        if index < 3:
            text[250] = f"term{sorted(wanted)[index]}"
        messages.append(" ".join(text))
    entries = []
    for uid in range(10_000):
        if uid % 3 == 0:
            keys: tuple[str, ...] = (f"term{uid}", f"alias {uid}")
        elif uid % 3 == 1:
            keys = (f"term{uid}", f"Term-{uid}")
        else:
            keys = (f"term{uid}",)
        entries.append(Entry(uid, keys=keys, content=f"Lore number {uid}.", order=uid % 7))
    entries.append(Entry(10_000, keys=("/riv(er|ulet)s/",), content="Water."))
    book = lore(*entries, scan_depth=5)
    result = run(book, *messages)
    assert set(uids(result)) == wanted | {10_000}
    assert result.rejected == {}
