"""Prompts for the Utility model and the tolerant reading of its answers. No Django, no network."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from memory import extractive
from memory.drafts import MAX_FACT, MAX_FACTS, MAX_HEADING, MAX_KEYWORDS, Draft, Line, render
from memory.summarize import EMPTY_SUMMARY, UNTITLED, block_messages, parse, rollup_messages

DAY = dt.datetime(2026, 3, 12, 20, 15, tzinfo=dt.UTC)
BLOCK = [
    Line(41, "Ada", "Hi Maren!", when=DAY, is_human=True),
    Line(42, "Maren", "*She lowers her voice.* The key is hidden under the third lighthouse step.", when=DAY),
    Line(43, "Ada", "I won't tell Tobin.", when=DAY + dt.timedelta(minutes=2), is_human=True),
]
CHILDREN = [
    Draft("Maren and Ada — 12 Mar 2026", ["Maren: The key is under the third step."], ["key"]),
    Draft("Maren and Tobin — 13 Mar 2026", ["Tobin: Tobin demanded the key."], ["Tobin", "key"]),
]
CLEAN = {
    "heading": "Maren and Ada at the lighthouse, 12 Mar 2026",
    "facts": ["Maren hid the key under the third lighthouse step.", "Ada promised not to tell Tobin."],
    "keywords": ["key", "lighthouse", "Tobin"],
}
EXPECTED = Draft(CLEAN["heading"], CLEAN["facts"], CLEAN["keywords"])


def system_and_user(messages: list[dict]) -> tuple[str, str]:
    assert [message["role"] for message in messages] == ["system", "user"]
    return messages[0]["content"], messages[1]["content"]


# block_messages


def test_block_prompt_holds_the_transcript_as_seq_speaker_lines():
    _, user = system_and_user(block_messages(BLOCK))
    assert "#41 Ada: Hi Maren!" in user
    assert "#42 Maren: *She lowers her voice.* The key is hidden under the third lighthouse step." in user
    assert "#43 Ada: I won't tell Tobin." in user


def test_block_prompt_asks_for_a_json_object_with_heading_facts_and_keywords():
    system, user = system_and_user(block_messages(BLOCK))
    assert "JSON" in system and "JSON" in user
    assert '"heading"' in system and '"facts"' in system and '"keywords"' in system
    assert "small talk" in system


def test_block_prompt_gives_the_dates_of_the_messages():
    _, user = system_and_user(block_messages(BLOCK))
    assert "Dates: 12 Mar 2026" in user


def test_block_prompt_marks_each_day_when_the_block_spans_days():
    block = [BLOCK[0], Line(44, "Maren", "Dawn came.", when=DAY + dt.timedelta(days=1))]
    _, user = system_and_user(block_messages(block))
    assert "Dates: 12–13 Mar 2026" in user
    assert (
        user.index("[12 Mar 2026]") < user.index("#41 Ada") < user.index("[13 Mar 2026]") < user.index("#44")
    )


def test_block_prompt_names_the_room_and_who_is_played_by_a_person():
    _, user = system_and_user(block_messages(BLOCK, room_title="The Lighthouse"))
    assert "Room: The Lighthouse" in user
    assert "Ada (played by a person)" in user


def test_block_prompt_with_pov_keeps_to_what_that_character_could_know():
    system, _ = system_and_user(block_messages(BLOCK, pov="Tobin"))
    assert "Tobin's own memory" in system
    assert "As Tobin saw it:" in system


def test_block_prompt_shortens_a_huge_message():
    block = [Line(1, "Ada", "word " * 50_000, when=DAY)]
    _, user = system_and_user(block_messages(block))
    assert len(user) < 10_000


def test_block_prompt_for_no_lines_is_still_well_formed():
    _, user = system_and_user(block_messages([]))
    assert "(no messages)" in user


# rollup_messages


def test_rollup_prompt_asks_for_the_arc_not_a_concatenation():
    system, _ = system_and_user(rollup_messages(CHILDREN, tier=1))
    assert "arc" in system
    assert "Do not repeat the notes one by one" in system
    assert "JSON" in system and "level 1" in system


def test_rollup_prompt_lists_the_children_oldest_first():
    _, user = system_and_user(rollup_messages(CHILDREN, tier=2))
    assert render(CHILDREN[0]) in user and render(CHILDREN[1]) in user
    assert user.index("Note 1:") < user.index(render(CHILDREN[0])) < user.index("Note 2:")


def test_rollup_prompt_with_pov():
    system, _ = system_and_user(rollup_messages(CHILDREN, tier=1, pov="Ada"))
    assert "As Ada saw it:" in system


# parse: JSON


def test_parse_clean_json():
    assert parse(json.dumps(CLEAN)) == EXPECTED


def test_parse_fenced_json_inside_prose():
    fenced = f"```json\n{json.dumps(CLEAN, indent=2)}\n```"
    text = f"Sure! Here is the summary:\n{fenced}\nLet me know if you need more."
    assert parse(text) == EXPECTED


def test_parse_json_inside_prose_without_a_fence():
    assert parse(f"Here you go: {json.dumps(CLEAN)} Hope that helps!") == EXPECTED


def test_parse_json_with_trailing_commas():
    text = json.dumps(CLEAN).replace('"]', '",]').replace("]}", "],}")
    assert parse(text) == EXPECTED


def test_parse_single_quoted_pseudo_json_with_apostrophes():
    text = (
        "{'heading': 'Maren and Ada at Maren's lighthouse', "
        "'facts': ['Maren hid the key.', \"Ada's coat is torn.\"], 'keywords': ['key', 'coat',]}"
    )
    assert parse(text) == Draft(
        "Maren and Ada at Maren's lighthouse", ["Maren hid the key.", "Ada's coat is torn."], ["key", "coat"]
    )


def test_parse_bare_keys_and_python_literals():
    draft = parse('{heading: "Maren and Ada", facts: ["Maren hid the key."], keywords: ["key"], final: True}')
    assert draft == Draft("Maren and Ada", ["Maren hid the key."], ["key"])


def test_parse_keys_in_any_case_facts_as_one_string_and_keywords_as_a_comma_string():
    text = json.dumps(
        {
            "Heading": "Maren and Ada",
            "FACTS": "- Maren hid the key.\n• Ada left at dawn.",
            "KeyWords": "key, dawn",
        }
    )
    assert parse(text) == Draft("Maren and Ada", ["Maren hid the key.", "Ada left at dawn."], ["key", "dawn"])


def test_parse_facts_as_one_paragraph_become_one_fact_per_sentence():
    draft = parse(
        json.dumps({"heading": "Maren and Ada", "facts": "Maren hid the key. Ada left.", "keywords": []})
    )
    assert draft.facts == ["Maren hid the key.", "Ada left."]


def test_parse_json_cut_off_mid_answer_keeps_the_complete_facts():
    text = '{"heading": "Maren and Ada", "facts": ["Maren hid the key.", "Ada promised not to te'
    draft = parse(text)
    assert draft.heading == "Maren and Ada"
    assert draft.facts == ["Maren hid the key."]


def test_parse_json_cut_off_after_a_whole_fact_keeps_it_even_without_a_full_stop():
    draft = parse(
        '{"heading": "Maren and Ada", "facts": ["Maren hid the key", "Ada left"], "keywords": ["key", "lig'
    )
    assert draft.facts == ["Maren hid the key", "Ada left"]
    assert draft.keywords == ["key"]


def test_parse_ignores_a_reasoning_block():
    answer = '{"heading": "Maren and Ada", "facts": ["Maren hid the key."]}'
    text = '<think>Maybe {"heading": "wrong"}</think>' + answer
    assert parse(text).heading == "Maren and Ada"


def test_parse_json_without_keywords_gets_the_names_in_its_text():
    draft = parse(json.dumps({"heading": "Maren and Ada", "facts": ["Maren hid the key from Tobin."]}))
    assert "Tobin" in draft.keywords and "Ada" in draft.keywords


def test_parse_a_json_array_of_facts_is_usable():
    draft = parse(json.dumps(["Maren hid the key.", "Ada left."]))
    assert draft.heading == UNTITLED
    assert draft.facts == ["Maren hid the key.", "Ada left."]


def test_parse_a_json_array_of_facts_takes_its_heading_from_the_fallback_lines():
    draft = parse(json.dumps(["Maren hid the key."]), fallback=BLOCK)
    assert draft.heading == extractive.summarise(BLOCK).heading
    assert draft.facts == ["Maren hid the key."]


@pytest.mark.parametrize(
    "text", ["42", "3.5", "null", "true", "[1, 2, 3]", "{}", '{"heading": "", "facts": []}']
)
def test_parse_json_that_is_not_a_summary_gives_the_empty_summary(text):
    assert parse(text) == Draft(EMPTY_SUMMARY, [], [])


@pytest.mark.parametrize("text", ["42", "[1, 2, 3]", '{"unrelated": 1}'])
def test_parse_json_that_is_not_a_summary_falls_back_to_the_lines(text):
    assert parse(text, fallback=BLOCK) == extractive.summarise(BLOCK)


# parse: labelled sections and prose


def test_parse_labelled_sections_with_bullets():
    text = (
        "Heading: Maren and Ada at the lighthouse\n"
        "Facts:\n- Maren hid the key.\n* Ada left.\n• Tobin arrived.\n1. The storm broke.\n"
        "Keywords: key, lighthouse, Tobin"
    )
    assert parse(text) == Draft(
        "Maren and Ada at the lighthouse",
        ["Maren hid the key.", "Ada left.", "Tobin arrived.", "The storm broke."],
        ["key", "lighthouse", "Tobin"],
    )


def test_parse_labels_in_any_case_with_content_on_the_same_line():
    text = "HEADING: Maren and Ada\nfacts: Maren hid the key.\nKEYWORDS: key"
    assert parse(text) == Draft("Maren and Ada", ["Maren hid the key."], ["key"])


def test_parse_bold_markdown_labels():
    text = (
        "**Heading**: Maren and Ada\n\n"
        "**Facts:**\n- Maren hid the key.\n- Ada left.\n\n"
        "**Keywords**\n- key\n- lamp"
    )
    assert parse(text) == Draft("Maren and Ada", ["Maren hid the key.", "Ada left."], ["key", "lamp"])


def test_parse_markdown_heading_labels():
    text = (
        "## Heading\nMaren and Ada at the Rusty Anchor\n"
        "## Key facts\n1) Maren hid the key.\n2) Ada left.\n"
        "## Tags\nkey"
    )
    assert parse(text) == Draft(
        "Maren and Ada at the Rusty Anchor", ["Maren hid the key.", "Ada left."], ["key"]
    )


def test_parse_plain_prose():
    draft = parse(
        "Maren and Ada talked at the lighthouse. Maren hid the key near Tobin's boat. Ada promised silence."
    )
    assert draft.heading == "Maren and Ada talked at the lighthouse."
    assert draft.facts == ["Maren hid the key near Tobin's boat.", "Ada promised silence."]
    assert draft.keywords == ["Ada", "Tobin"]  # capitalised, and not opening a sentence


def test_parse_prose_skips_a_preamble():
    draft = parse("Sure! Here is the summary: Maren hid the key. Ada left.")
    assert draft.heading == "Maren hid the key."


# parse: empty, useless and odd answers


def test_parse_empty_answer_without_fallback_gives_the_empty_summary():
    assert parse("") == Draft(EMPTY_SUMMARY, [], [])


def test_parse_empty_answer_with_fallback_summarises_the_lines():
    draft = parse("   ", fallback=BLOCK)
    assert draft == extractive.summarise(BLOCK)
    assert "Maren: The key is hidden under the third lighthouse step." in draft.facts


def test_parse_a_refusal_falls_back_to_the_lines():
    assert parse("I'm sorry, but I can't help with that.", fallback=BLOCK) == extractive.summarise(BLOCK)


def test_parse_enforces_the_caps():
    text = json.dumps(
        {
            "heading": "Maren " * 100,
            "facts": [f"Fact number {i} is about the lighthouse." for i in range(50)] + ["y " * 400],
            "keywords": [f"word{i}" for i in range(50)],
        }
    )
    draft = parse(text)
    assert len(draft.facts) == MAX_FACTS
    assert len(draft.keywords) == MAX_KEYWORDS
    assert len(draft.heading) <= MAX_HEADING


ODD = {
    "none": None,
    "unbalanced": '{"heading": "Maren", "facts": [[[{',
    "deeply nested": "[" * 5000 + "]" * 5000,
    "nested objects": '{"heading": ' * 3000,
    "huge prose": "word " * 50_000,
    "bracketed prose": "[" + "word " * 20_000,
    "quotes": "{'a': 'it''s " * 5000,
    "emoji": "😀🔥👍",
    "control": "\x00\x1b[31m\x07",
    "fence only": "```json\n```",
    "wrong types": '{"heading": 7, "facts": {"a": null, "b": ["x", 3]}, "keywords": 12}',
    "non-latin": '{"заголовок": "Маша", "факты": ["Ключ спрятан."]}',
}


@pytest.mark.parametrize("text", ODD.values(), ids=ODD.keys())
def test_parse_never_raises_and_gives_a_usable_draft(text):
    draft = parse(text, fallback=BLOCK)
    assert isinstance(draft, Draft)
    assert draft.heading.strip() and len(draft.heading) <= MAX_HEADING
    assert len(draft.facts) <= MAX_FACTS and all(len(fact) <= MAX_FACT for fact in draft.facts)
    assert len(draft.keywords) <= MAX_KEYWORDS
