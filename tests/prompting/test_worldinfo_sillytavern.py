"""One test per SillyTavern world-info rule, each expected output reasoned from ST 1.12.6."""

from __future__ import annotations

import random

from orbchat.prompting import macros
from orbchat.prompting.worldinfo import (
    Book,
    BookKind,
    Character,
    CharacterFilter,
    Entry,
    InsertionStrategy,
    Logic,
    Settings,
    TimedEffect,
    TimedState,
    activate,
)


def lore(*entries: Entry, **settings) -> Book:
    settings.setdefault("id", 1)
    return Book(entries=tuple(entries), **settings)


def run(books, *messages, **kwargs):
    books = [books] if isinstance(books, Book) else books
    return activate(books, list(messages), rng=random.Random(0), **kwargs)


def uids(result) -> list[int]:
    return sorted(a.entry.uid for a in result.activated)


def test_whole_words_count_non_ascii_letters_as_boundaries():
    book = lore(
        Entry(1, keys=("кот",)),
        Entry(2, keys=("龙",)),
        Entry(3, keys=("cat",)),
        Entry(4, keys=("dog",)),
        scan_depth=4,
    )
    assert uids(run(book, "котенок", "我看到龙了", "catégorie", "dogs")) == [1, 2, 3]


def test_speaker_names_are_scanned_unless_include_names_is_off():
    book = lore(Entry(1, keys=("Seraphina",)))
    assert uids(run(book, ("Seraphina", "Hello there."))) == [1]
    assert uids(run(book, ("Seraphina", "Hello there."), settings=Settings(include_names=False))) == []


def test_macros_expand_in_keys_and_in_content_before_recursion():
    ctx = macros.MacroContext(char="Seraphina", user="Ann")
    book = lore(Entry(1, keys=("{{char}}",), content="{{user}} is here."), Entry(2, keys=("Ann",)))
    result = run(book, "Seraphina smiles.", substitute=lambda text: macros.substitute(text, ctx))
    assert uids(result) == [1, 2]
    assert next(a for a in result.activated if a.entry.uid == 1).entry.content == "Ann is here."


def test_regex_key_with_an_unescaped_slash_is_plain_text():
    book = lore(Entry(1, keys=("/a/b/",)), Entry(2, keys=(r"/a\/b/",)))
    assert uids(run(book, "see /a/b/ here")) == [1, 2]
    assert uids(run(book, "see a/b here")) == [2]


def test_regex_caret_never_sees_a_message_start():
    # Every scanned message starts with ST's \x01 marker, so ^ alone cannot match it.
    assert uids(run(lore(Entry(1, keys=("/^dragon/",))), "dragon")) == []


def test_regex_matches_across_messages_joined_newest_first():
    book = lore(Entry(1, keys=(r"/new[\s\S]*old/",)), Entry(2, keys=(r"/old[\s\S]*new/",)))
    assert uids(run(book, "old", "new")) == [1]


def test_invalid_regex_key_is_matched_as_plain_text():
    assert uids(run(lore(Entry(1, keys=("/[oops/",))), "a /[oops/ b")) == [1]


def test_secondary_list_of_only_an_empty_string_is_a_key_that_never_matches():
    # ST counts [""] as one secondary key; its empty text is never found.
    def entry(logic):
        return Entry(1, keys=("dragon",), secondary_keys=("",), selective_logic=logic)

    assert uids(run(lore(entry(Logic.AND_ANY)), "dragon")) == []
    assert uids(run(lore(entry(Logic.NOT_ANY)), "dragon")) == [1]


def test_budget_cap_limits_the_shared_budget():
    book = lore(Entry(1, keys=("dragon",), content="x" * 40), token_budget=1000)
    assert uids(run(book, "dragon", settings=Settings(budget_cap=5))) == []


def test_prevent_recursion_content_of_earlier_passes_is_not_counted_in_the_budget():
    book = lore(
        Entry(1, keys=("dragon",), content="x" * 36, prevent_recursion=True, order=200),
        Entry(2, keys=("dragon",), content="castle"),
        Entry(3, keys=("castle",), content="y" * 36),
    )
    # Pass 1: 37 + 7 chars < 50. Pass 2 counts only "castle\n" from before, plus 37.
    result = run(book, "dragon", count_tokens=len, settings=Settings(token_budget=50))
    assert uids(result) == [1, 2, 3]


def test_character_first_strategy_fills_the_budget_with_character_lore_first():
    world = lore(Entry(1, keys=("dragon",), content="x" * 8, order=900), id=1)
    card = lore(Entry(1, keys=("dragon",), content="y" * 8, order=1), id=2, kind=BookKind.CHARACTER)
    kept = run([world, card], "dragon", count_tokens=len, settings=Settings(token_budget=15))
    assert [a.book_id for a in kept.activated] == [2]
    evenly = Settings(token_budget=15, insertion_strategy=InsertionStrategy.EVENLY)
    assert [a.book_id for a in run([world, card], "dragon", count_tokens=len, settings=evenly).activated] == [
        1
    ]
    chat = lore(Entry(1, keys=("dragon",), content="z" * 8), id=3, kind=BookKind.CHAT)
    first = run([world, card, chat], "dragon", count_tokens=len, settings=Settings(token_budget=15))
    assert [a.book_id for a in first.activated] == [3]


def test_minimum_activations_scan_older_messages_until_enough_fire():
    book = lore(Entry(1, keys=("dragon",)), Entry(2, keys=("castle",)), scan_depth=1)
    assert uids(run(book, "castle", "quiet", "dragon")) == [1]
    deeper = run(book, "castle", "quiet", "dragon", settings=Settings(min_activations=2))
    assert uids(deeper) == [1, 2]
    # ST tests the depth already scanned against the maximum, so it scans one message past it.
    capped = run(
        book, "castle", "quiet", "dragon", settings=Settings(min_activations=2, min_activations_depth_max=1)
    )
    assert uids(capped) == [1]


def test_decorators_force_or_forbid_activation_and_are_stripped():
    book = lore(
        Entry(1, keys=("nothing",), content="@@activate\nAlways."),
        Entry(2, keys=("dragon",), content="@@dont_activate\nNever."),
        Entry(3, constant=True, content="@@@activate\nEscaped."),
    )
    result = run(book, "dragon")
    assert uids(result) == [1, 3]
    contents = {a.entry.uid: a.entry.content for a in result.activated}
    assert contents == {1: "Always.", 3: "Escaped."}


def test_character_filter_limits_or_excludes_by_name_and_tag():
    only = Entry(1, constant=True, character_filter=CharacterFilter(names=("Seraphina",)))
    not_elves = Entry(2, constant=True, character_filter=CharacterFilter(is_exclude=True, tags=("elf",)))
    book = lore(only, not_elves)
    assert uids(run(book, "hi", character=Character("Seraphina", tags=("elf",)))) == [1]
    assert uids(run(book, "hi", character=Character("Bob", tags=("human",)))) == [2]


def test_sticky_then_cooldown_timeline():
    book = lore(Entry(1, keys=("dragon",), sticky=2, cooldown=3))
    state = run(book, "dragon", message_count=10).state
    assert uids(run(book, "quiet", message_count=11, state=state)) == [1]
    for count in (12, 13, 14):
        assert uids(run(book, "dragon", message_count=count, state=state)) == []
    assert uids(run(book, "dragon", message_count=15, state=state)) == [1]


def test_a_sticky_entry_skips_its_delay_until_recursion():
    book = lore(Entry(1, keys=("dragon",), delay_until_recursion=1, sticky=3))
    state = TimedState({(1, 1): TimedEffect(activated_at=10, sticky_until=13)})
    assert uids(run(book, "quiet", message_count=11, state=state)) == [1]


class Rolls(random.Random):
    """Random numbers drawn from a fixed list, so a test says which way each roll goes."""

    def __init__(self, *rolls: float) -> None:
        super().__init__(0)
        self.rolls = list(rolls)

    def random(self) -> float:
        return self.rolls.pop(0)


def test_delay_levels_open_passes_even_when_no_book_recurses():
    # SillyTavern's open delay levels start a pass of their own with recursion off; that pass scans
    # the activated entries' text too, and "exclude recursion" does not apply in it.
    book = lore(
        Entry(1, keys=("dragon",), content="see castle"),
        Entry(2, keys=("dragon",), delay_until_recursion=1),
        Entry(3, keys=("castle",), delay_until_recursion=2),
        recursive=False,
    )
    assert uids(run(book, "dragon")) == [1, 2, 3]
    excluded = lore(
        Entry(1, keys=("dragon",), content="see castle"),
        Entry(2, keys=("dragon",), delay_until_recursion=1),
        Entry(3, keys=("dragon",), delay_until_recursion=2),
        Entry(4, keys=("castle",), exclude_recursion=True),
        recursive=False,
    )
    assert uids(run(excluded, "dragon")) == [1, 2, 3, 4]


def test_regex_keys_use_javascript_ascii_classes():
    # Without the u flag JavaScript's \w, \d and \b are ASCII only, and "." stops at \r as at \n.
    book = lore(
        Entry(1, keys=("/я\\w/",)),
        Entry(2, keys=("/\\bкот\\b/",)),
        Entry(3, keys=("/a.b/",)),
        Entry(4, keys=("/\\d/",)),
        Entry(5, keys=("/[\\w]д/",)),
        Entry(6, keys=("/x\\Bк/",)),
        Entry(7, keys=("/xy$/",)),
    )
    assert uids(run(book, "xк xy", "яд мой кот a\rb ١")) == [7]


def test_regex_dollar_without_m_never_matches_before_a_final_newline():
    book = lore(Entry(1, constant=True, content="the tail\n"), Entry(2, keys=("/tail$/",)))
    assert uids(run(book, "hi")) == [1]
    assert uids(run(book, "the tail", "hi")) == [1, 2]


def test_an_entry_losing_two_groups_takes_the_last_candidate_with_it():
    # SillyTavern removes a loser by its index; removing it a second time (index -1) removes the
    # last candidate of the pass instead.
    book = lore(
        Entry(1, keys=("dragon",), group="g1,g2"),
        Entry(2, keys=("dragon",), group="g1"),
        Entry(3, keys=("dragon",), group="g2"),
        Entry(4, keys=("dragon",)),
    )
    result = activate([book], ["dragon"], rng=Rolls(0.9, 0.9))
    assert sorted(uids(result)) == [2, 3]


def test_a_sticky_entry_still_in_its_first_cooldown_leaves_its_group():
    # SillyTavern starts the cooldown at activation alongside the sticky; an inclusion group drops
    # an entry on cooldown even while it is sticky, and the group has no winner that message.
    book = lore(
        Entry(1, keys=("dragon",), group="g", sticky=2, cooldown=3),
        Entry(2, keys=("castle",), group="g"),
    )
    state = TimedState({(1, 1): TimedEffect(activated_at=1, sticky_until=3, cooldown_until=6)})
    result = activate([book], ["a", "castle"], state=state, rng=Rolls(0.1))
    assert uids(result) == []
