from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

import pytest

from orbchat.prompting.macros import MacroContext, humanize_duration, substitute

NOW = datetime(2026, 11, 29, 14, 5, tzinfo=UTC)  # a Sunday afternoon


def ctx(**fields) -> MacroContext:
    defaults = {
        "char": "Maren",
        "user": "Ada",
        "persona": "A curious newcomer.",
        "description": "Keeper of the light.",
        "scenario": "A foggy island.",
        "personality": "Warm, patient.",
        "last_message": "Hello there.",
        "now": NOW,
        "chat_id": "chat-1",
        "rng": random.Random(7),
    }
    return MacroContext(**{**defaults, **fields})


@pytest.mark.parametrize(
    ("macro", "expected"),
    [
        ("{{char}}", "Maren"),
        ("{{user}}", "Ada"),
        ("{{persona}}", "A curious newcomer."),
        ("{{description}}", "Keeper of the light."),
        ("{{scenario}}", "A foggy island."),
        ("{{personality}}", "Warm, patient."),
        ("{{lastMessage}}", "Hello there."),
        ("{{newline}}", "\n"),
    ],
)
def test_simple_macros(macro, expected):
    assert substitute(f"<{macro}>", ctx()) == f"<{expected}>"


def test_time_date_and_weekday_use_the_injected_clock():
    assert substitute("{{time}} | {{date}} | {{weekday}}", ctx()) == "2:05 PM | November 29, 2026 | Sunday"
    morning = datetime(2026, 1, 5, 0, 30, tzinfo=UTC)
    assert substitute("{{time}} {{weekday}}", ctx(now=morning)) == "12:30 AM Monday"


def test_clock_defaults_to_now():
    assert substitute("{{date}}", ctx(now=None)).endswith(str(datetime.now(UTC).year))


def test_random_double_colon_form():
    results = {substitute("{{random::red::green::blue}}", ctx(rng=random.Random(seed))) for seed in range(40)}
    assert results == {"red", "green", "blue"}


def test_random_legacy_comma_form():
    results = {substitute("{{random:red, green,blue}}", ctx(rng=random.Random(seed))) for seed in range(40)}
    assert results == {"red", "green", "blue"}
    assert substitute("{{random:a\\, b}}", ctx()) == "a, b"


def test_random_uses_the_given_rng():
    text = "{{random::1::2::3::4::5::6::7::8::9}}" * 5
    assert substitute(text, ctx(rng=random.Random(3))) == substitute(text, ctx(rng=random.Random(3)))


def test_pick_is_stable_for_a_chat():
    text = "{{pick::north::south::east::west}} then {{pick::north::south::east::west}}"
    first = substitute(text, ctx(rng=random.Random(1)))
    assert all(substitute(text, ctx(rng=random.Random(seed))) == first for seed in range(10))
    assert first.split(" then ")[0] in {"north", "south", "east", "west"}


def test_pick_differs_across_chats():
    text = "{{pick::a::b::c::d::e::f::g::h}}"
    assert len({substitute(text, ctx(chat_id=f"chat-{n}")) for n in range(12)}) >= 2


def test_pick_depends_on_the_occurrence():
    text = " ".join(["{{pick::a::b::c::d::e::f::g::h}}"] * 12)
    assert len(set(substitute(text, ctx()).split())) >= 2


def test_pick_legacy_comma_form():
    assert substitute("{{pick:a, b, c}}", ctx()) in {"a", "b", "c"}


@pytest.mark.parametrize(
    ("macro", "low", "high"),
    [("{{roll:1d20}}", 1, 20), ("{{roll::2d6+3}}", 5, 15), ("{{roll:20}}", 1, 20), ("{{roll:d4-1}}", 0, 3)],
)
def test_roll_stays_within_bounds(macro, low, high):
    rng = random.Random(42)
    rolls = [int(substitute(macro, ctx(rng=rng))) for _ in range(300)]
    assert min(rolls) >= low
    assert max(rolls) <= high
    assert len(set(rolls)) > 1


@pytest.mark.parametrize(
    "macro", ["{{roll:0d6}}", "{{roll:101d6}}", "{{roll:1d10001}}", "{{roll:banana}}", "{{roll:}}"]
)
def test_bad_dice_are_left_as_typed(macro):
    assert substitute(macro, ctx()) == macro


def test_dice_at_the_caps_are_rolled():
    assert 100 <= int(substitute("{{roll:100d10000}}", ctx())) <= 1_000_000


def test_idle_duration():
    assert substitute("{{idle_duration}}", ctx(last_message_at=NOW - timedelta(minutes=5))) == "5 minutes"
    assert substitute("{{idle_duration}}", ctx(last_message_at=NOW - timedelta(hours=2))) == "2 hours"
    assert substitute("{{idle_duration}}", ctx(last_message_at=NOW - timedelta(seconds=10))) == "just now"
    assert substitute("{{idle_duration}}", ctx(last_message_at=None)) == "just now"
    naive = (NOW - timedelta(days=3)).replace(tzinfo=None)
    assert substitute("{{idle_duration}}", ctx(last_message_at=naive)) == "3 days"


def test_humanize_duration():
    assert humanize_duration(60) == "1 minute"
    assert humanize_duration(3600) == "1 hour"
    assert humanize_duration(86400 * 60) == "2 months"
    assert humanize_duration(86400 * 800) == "2 years"
    assert humanize_duration(-30) == "just now"


def test_comments_are_removed():
    assert substitute("a{{// a note for the author}}b", ctx()) == "ab"
    assert substitute("a{{// spans\nlines}}b", ctx()) == "ab"


def test_trim_removes_itself_and_surrounding_whitespace():
    assert substitute("first line\n\n{{trim}}\n  second", ctx()) == "first linesecond"
    assert substitute("{{trim}}  {{char}}  {{trim}}", ctx()) == "Maren"
    assert substitute("a {{TRIM}} {{trim}} b", ctx()) == "ab"


def test_unknown_macros_are_left_as_typed():
    text = "{{unknownThing}} {{ foo }} {{char::x}} {{memory}} {{}} {{random}} {single} }} {{"
    assert substitute(text, ctx()) == text


def test_names_are_case_insensitive():
    assert substitute("{{CHAR}} {{User}} {{LASTMESSAGE}} {{Random::x}} {{ROLL:1d1}}", ctx()) == (
        "Maren Ada Hello there. x 1"
    )


def test_values_are_not_expanded_again():
    context = ctx(user="{{char}}", char="{{user}}", last_message="{{roll:1d6}} {{// x}}")
    assert (
        substitute("{{user}}/{{char}}/{{lastMessage}}", context) == "{{char}}/{{user}}/{{roll:1d6}} {{// x}}"
    )


def test_nested_macros_do_not_crash():
    assert substitute("{{random::{{user}}::b}}", ctx()) == "{{random::Ada::b}}"
    assert substitute("{{{char}}}", ctx()) == "{Maren}"


def test_text_without_macros_is_returned_unchanged():
    assert substitute("", ctx()) == ""
    assert substitute("plain { text }", ctx()) == "plain { text }"


def test_large_text_is_fast():
    chunk = "The tide turned against the rocks below the lamp room. " * 12
    macros = "{{char}} {{user}} {{random::a::b}} {{pick::x::y}} {{roll:2d6}} {{time}} {{unknown}} {{// c}}"
    text = (chunk + macros + "\n") * 125
    text += "x" * (100_000 - len(text))
    assert text.count("{{") == 1000
    best = min(_timed(substitute, text, ctx()) for _ in range(3))
    assert best < 0.1


def test_pathological_input_is_linear():
    context = ctx()
    for text in (" " * 100_000 + "{{trim}}", "{{" * 50_000, "{{a}" * 25_000):
        assert _timed(substitute, text, context) < 0.5


def _timed(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


# Chat and global variables, as SillyTavern's variables.js evaluates them.


def test_setvar_in_a_greeting_sets_what_a_later_prompt_reads():
    chat: dict = {}
    assert substitute("{{setvar::hp::100}}You wake up.", ctx(variables=chat)) == "You wake up."
    assert chat == {"hp": "100"}
    assert substitute("HP: {{getvar::hp}}", ctx(variables=chat)) == "HP: 100"


def test_a_line_reads_its_variables_before_it_sets_them_and_the_next_line_sees_the_new_value():
    chat = {"mood": "calm"}
    text = "{{setvar::mood::angry}}{{getvar::mood}}\n{{getvar::mood}}"
    assert substitute(text, ctx(variables=chat)) == "calm\nangry"


@pytest.mark.parametrize(
    ("stored", "shown"),
    [("05", "5"), ("1.50", "1.5"), (" 7 ", "7"), ("0x10", "16"), ("abc", "abc"), ("  ", "  "), (3, "3")],
)
def test_getvar_shows_a_number_as_javascript_writes_it(stored, shown):
    assert substitute("{{getvar::x}}", ctx(variables={"x": stored})) == shown


def test_an_unset_variable_reads_empty_and_counting_starts_from_zero():
    chat: dict = {}
    assert substitute(
        "[{{getvar::gold}}] {{incvar::gold}} {{incvar::gold}} {{decvar::debt}}", ctx(variables=chat)
    ) == ("[] 1 2 -1")
    assert chat == {"gold": 2, "debt": -1}


def test_addvar_sums_numbers_joins_text_and_appends_to_a_json_list():
    chat = {"gold": "10", "title": "Sir", "bag": '["rope"]'}
    out = substitute("{{addvar::gold::5}}{{addvar::title:: Bob}}{{addvar::bag::lamp}}", ctx(variables=chat))
    assert out == ""
    assert chat == {"gold": 15, "title": "Sir Bob", "bag": '["rope","lamp"]'}


def test_global_variables_are_kept_apart_from_the_chats():
    chat: dict = {"x": "chat"}
    everywhere: dict = {}
    out = substitute(
        "{{setglobalvar::x::global}}{{incglobalvar::turns}}\n{{getvar::x}}/{{getglobalvar::x}}",
        ctx(variables=chat, global_variables=everywhere),
    )
    assert out == "1\nchat/global"
    assert everywhere == {"x": "global", "turns": 1}
    assert chat == {"x": "chat"}


def test_a_variables_value_is_not_read_as_a_macro():
    assert substitute("{{getvar::trap}} {{char}}", ctx(variables={"trap": "{{user}}"})) == "{{user}} Maren"


def test_without_a_chat_the_variable_macros_leave_nothing_behind():
    assert substitute("a{{setvar::x::1}}b{{getvar::x}}c", ctx()) == "abc"
