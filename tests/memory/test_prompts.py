"""The memory prompts as templates: built-in text unchanged, rendering, validation. No Django."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from memory import prompts
from memory.drafts import Draft, Line
from memory.manager import manager_messages, scene_messages
from memory.summarize import block_messages, rollup_messages

# The requests the summariser sent before its prompts could be rewritten, for these inputs.
GOLDEN = json.loads((Path(__file__).parent / "data" / "builtin_prompts.json").read_text())
DAY = dt.datetime(2026, 3, 12, 20, 15, tzinfo=dt.UTC)
LINES = [
    Line(41, "Ada", "Hi Maren!  ", when=DAY, is_human=True),
    Line(42, "Maren", "*She lowers her voice.* The key is {{char}} hidden under the third step.", when=DAY),
    Line(43, "Ada", "I won't tell Tobin.\n\n", when=DAY + dt.timedelta(days=1), is_human=True),
    Line(44, "", "   ", when=None),
]
CHILDREN = [
    Draft("Maren and Ada — 12 Mar 2026", ["Maren: The key is under the third step."], ["key"]),
    Draft("Maren and Tobin — 13 Mar 2026", ["Tobin: Tobin demanded the {{pov}} key."], ["Tobin", "key"]),
]
BLOCKS = [
    {"lines": LINES, "pov": None, "room_title": ""},
    {"lines": LINES[:2], "pov": "Maren", "room_title": "The Lighthouse"},
    {"lines": LINES[1:], "pov": "  ", "room_title": "Night"},
    {"lines": [], "pov": None, "room_title": ""},
]
ROLLUPS = [
    {"children": CHILDREN, "tier": 1, "pov": None},
    {"children": CHILDREN, "tier": 3, "pov": "Ada"},
    {"children": [], "tier": "x", "pov": None},
]


@pytest.mark.parametrize(("case", "expected"), list(zip(BLOCKS, GOLDEN["block"], strict=True)))
def test_the_built_in_block_prompt_is_byte_for_byte_what_it_was(case, expected):
    assert block_messages(case["lines"], pov=case["pov"], room_title=case["room_title"]) == expected


@pytest.mark.parametrize(("case", "expected"), list(zip(ROLLUPS, GOLDEN["rollup"], strict=True)))
def test_the_built_in_rollup_prompt_is_byte_for_byte_what_it_was(case, expected):
    assert rollup_messages(case["children"], tier=case["tier"], pov=case["pov"]) == expected


@pytest.mark.parametrize("kind", list(prompts.KINDS))
def test_the_built_in_text_given_as_a_template_is_the_built_in_prompt(kind):
    assert prompts.validate(kind, prompts.builtin(kind)) == []
    case = BLOCKS[1]
    if kind == "block":
        as_typed = block_messages(case["lines"], pov="Maren", template=prompts.builtin(kind))
        assert as_typed == block_messages(case["lines"], pov="Maren")
    elif kind == "manager":
        as_typed = manager_messages(case["lines"], [], pov="Maren", template=prompts.builtin(kind))
        assert as_typed == manager_messages(case["lines"], [], pov="Maren")
        assert as_typed[0]["content"].startswith("You keep the lasting facts of a long roleplay chat")
        assert "Maren's own memory" in as_typed[0]["content"] and "{{" not in as_typed[0]["content"]
        user = as_typed[1]["content"]
        assert user.startswith("Facts kept:\n(none yet)\n\nDates: 12 Mar 2026\n\nTranscript:\n#")
    elif kind == "scene":
        as_typed = scene_messages(case["lines"], template=prompts.builtin(kind))
        assert as_typed == scene_messages(case["lines"])
        assert "{{" not in as_typed[0]["content"] and as_typed[1]["content"].startswith("Latest messages:\n#")
    else:
        as_typed = rollup_messages(CHILDREN, tier=2, pov="Ada", template=prompts.builtin(kind))
        assert as_typed == rollup_messages(CHILDREN, tier=2, pov="Ada")


def test_a_custom_block_prompt_puts_the_instructions_first_and_the_messages_after():
    template = "Summarise {{room}} for {{ POV }}. Characters: {{char}}; people: {{user}}."
    template += "\n{{messages}}\nIn French."
    system, user = block_messages(LINES[:2], pov="Maren", room_title="The Lighthouse", template=template)
    assert system == {
        "role": "system",
        "content": "Summarise The Lighthouse for Maren. Characters: Maren; people: Ada.",
    }
    assert user["role"] == "user"
    assert user["content"].startswith("Room: The Lighthouse\nDates: 12 Mar 2026\n")
    assert "#42 Maren: *She lowers her voice.*" in user["content"]
    assert user["content"].endswith("\nIn French.")


def test_braces_inside_the_messages_are_not_read_as_placeholders():
    template = "Keep it short.\n{{messages}}"
    (_system, user) = block_messages(LINES[:2], pov="Maren", template=template)
    assert "The key is {{char}} hidden" in user["content"]
    (_system, user) = rollup_messages(CHILDREN, tier=1, pov="Ada", template="Arc.\n{{notes}}")
    assert "demanded the {{pov}} key" in user["content"]


def test_a_prompt_that_starts_with_the_material_is_one_user_message():
    messages = rollup_messages(CHILDREN, tier=2, template="{{notes}}\n\nLevel {{tier}} note, please.")
    assert [message["role"] for message in messages] == ["user"]
    assert messages[0]["content"].startswith("Notes, oldest first:\n\nNote 1:\n")
    assert messages[0]["content"].endswith("Level 2 note, please.")


def test_the_pov_rule_is_empty_for_the_shared_memory():
    template = "Rules.\n\n{{pov_rule}}\n\n{{messages}}"
    shared = block_messages(LINES[:2], template=template)
    own = block_messages(LINES[:2], pov="Maren", template=template)
    assert shared[0]["content"] == "Rules."
    assert own[0]["content"].startswith("Rules.\n\nWrite this note as Maren's own memory.")


def test_validate_names_an_unknown_placeholder_and_lists_the_offered_ones():
    (problem,) = prompts.validate("rollup", "Write about {{char}}.\n{{notes}}")
    assert problem.startswith("Unknown placeholder {{char}}.")
    assert "{{notes}}, {{tier}}, {{pov}}, {{pov_rule}}, {{room}}" in problem


def test_validate_wants_the_material_placeholder_exactly_once():
    (missing,) = prompts.validate("block", "Summarise the chat for {{pov}}.")
    assert missing.startswith("The prompt needs {{messages}}")
    (twice,) = prompts.validate("block", "{{messages}}\n{{Messages}}")
    assert twice == "{{messages}} may appear only once."


def test_validate_refuses_a_prompt_that_is_too_long():
    (problem,) = prompts.validate("block", "{{messages}}" + "x" * prompts.MAX_TEMPLATE)
    assert problem == f"The prompt is {prompts.MAX_TEMPLATE + 12:,} characters long; the most is 8,000."


@pytest.mark.parametrize(
    ("template", "braces", "near"),
    [
        ("{{messages}} and {{pov", "{{", "{{pov"),
        ('{{messages}} {"a": {"b": 1}}', "}}", '{"b": 1}}'),
    ],
)
def test_validate_points_at_unbalanced_braces(template, braces, near):
    (problem,) = prompts.validate("block", template)
    assert problem.startswith(f"Unbalanced braces: “{braces}” without its other half near")
    assert near in problem


def test_single_braces_as_in_json_are_fine():
    assert prompts.validate("block", 'Answer {"heading": "…", "facts": ["…"]}\n{{messages}}') == []


@pytest.mark.parametrize(
    ("stored", "expected"), [({"block": "Mine {{messages}}"}, "Mine {{messages}}"), ({}, "")]
)
def test_the_stored_prompt_of_a_kind_or_the_built_in_one(stored, expected):
    assert prompts.custom(stored, "block") == expected
    assert prompts.custom(stored, "rollup") == ""


@pytest.mark.parametrize("stored", [None, [], "text", {"block": 3}])
def test_stored_prompts_that_are_not_text_by_kind_give_the_built_in_one(stored):
    assert prompts.custom(stored, "block") == ""
