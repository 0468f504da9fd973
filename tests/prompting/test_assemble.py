from __future__ import annotations

import time
from dataclasses import replace

import pytest

from orbchat.interop.presets import parse_chat_completion_preset
from orbchat.library.presets import DEFAULT_POST_HISTORY, default_sections, marker, section
from orbchat.prompting.assemble import (
    CONTINUE_NUDGE,
    CardInfo,
    DepthPrompt,
    HistoryMessage,
    PersonInfo,
    PromptInput,
    WorldInsert,
    assemble,
    default_count_tokens,
)
from orbchat.prompting.worldinfo import Position

MAREN = CardInfo(
    name="Maren",
    description="{{char}} keeps the lighthouse for {{user}}.",
    personality="Warm, patient.",
    scenario="A foggy island.",
    mes_example="<START>\n{{user}}: Hi\n{{char}}: Hello.\n<start>\n{{char}}: Storm's coming.",
    post_history_instructions="Stay gentle, {{char}}.",
)


def words(text: str) -> int:
    return len(text.split())


def lit(text: str, **kwargs) -> dict:
    return section(kind="literal", name=kwargs.pop("name", "Literal"), text=text, **kwargs)


def chat(count: int, start: int = 1, **kwargs) -> list[HistoryMessage]:
    return [
        HistoryMessage(
            seq=seq,
            role="user" if seq % 2 else "assistant",
            name="Ada" if seq % 2 else "Maren",
            text=f"message {seq}",
            **kwargs,
        )
        for seq in range(start, start + count)
    ]


def make(sections: list[dict], **kwargs) -> PromptInput:
    defaults = {
        "characters": [MAREN],
        "speaker": "Maren",
        "user_name": "Ada",
        "count_tokens": words,
    }
    return PromptInput(sections=sections, **{**defaults, **kwargs})


def contents(prompt) -> list[str]:
    return [message["content"] for message in prompt.messages]


def only(sections: list[dict], **kwargs) -> list[str]:
    return contents(assemble(make(sections, **kwargs)))


# Literal sections and the main prompt


def test_literal_section_keeps_its_role_and_substitutes_macros():
    prompt = assemble(make([lit("Hello {{user}}.", role="user"), lit("")]))
    assert prompt.messages == [{"role": "user", "content": "Hello Ada."}]
    assert [(r.kind, r.messages) for r in prompt.sections] == [("literal", 1), ("literal", 0)]


def test_main_prompt_is_replaced_by_the_speakers_system_prompt_with_original():
    card = CardInfo(name="Maren", system_prompt="Card rules for {{char}}. {{original}} End.")
    main = lit("Preset main for {{user}}.", identifier="main")
    other = CardInfo(name="Jory", system_prompt="Jory's rules.")
    assert only([main], characters=[other, card]) == ["Card rules for Maren. Preset main for Ada. End."]


def test_main_prompt_stays_when_the_card_has_no_system_prompt():
    assert only([lit("Be {{char}}.", identifier="main")]) == ["Be Maren."]


def test_main_prompt_marker_is_treated_as_the_main_literal():
    card = CardInfo(name="Maren", system_prompt="Override; {{original}}")
    sections = [marker("main_prompt", text="Preset text.")]
    assert only(sections) == ["Preset text."]
    assert only(sections, characters=[card]) == ["Override; Preset text."]


def test_disabled_sections_are_skipped_and_not_reported():
    prompt = assemble(make([lit("kept", name="A"), lit("gone", name="B", enabled=False), marker("persona")]))
    assert contents(prompt) == ["kept"]
    assert [r.name for r in prompt.sections] == ["A", "Persona"]


# Markers


def test_char_description_single_card_substitutes_macros():
    assert only([marker("char_description")]) == ["Maren keeps the lighthouse for Ada."]


def test_char_description_several_cards_are_prefixed_with_their_names():
    jory = CardInfo(name="Jory", description="{{char}} fishes.")
    got = only([marker("char_description")], characters=[MAREN, jory])
    assert got == ["Maren: Maren keeps the lighthouse for Ada.\nJory: Jory fishes."]


def test_char_personality_and_scenario():
    assert only([marker("char_personality"), marker("scenario")]) == [
        "Maren's personality: Warm, patient.",
        "Scenario: A foggy island.",
    ]


def test_empty_card_fields_add_nothing_but_are_reported():
    prompt = assemble(make([marker("char_personality"), marker("scenario")], characters=[CardInfo("Maren")]))
    assert prompt.messages == []
    assert [(r.name, r.tokens, r.messages) for r in prompt.sections] == [
        ("Character personality", 0, 0),
        ("Scenario", 0, 0),
    ]


def test_persona_marker():
    assert only([marker("persona")], persona_description="{{user}} is a cartographer.") == [
        "Ada is a cartographer."
    ]


def test_a_shared_rooms_other_people_follow_the_writers_persona_each_as_themselves():
    others = [
        PersonInfo("Wren", "{{user}} hums while rowing."),
        PersonInfo("Sable", ""),  # no description: nothing to tell the model
        PersonInfo("Tam", "{{user}} trusts {{char}}."),
    ]
    assert only([marker("persona")], persona_description="{{user}} maps coasts.", others=others) == [
        "Ada: Ada maps coasts.\nWren: Wren hums while rowing.\nTam: Tam trusts Maren."
    ]


def test_without_a_persona_of_their_own_the_writer_is_not_listed_but_the_others_are():
    others = [PersonInfo("Wren", "A courier.")]
    assert only([marker("persona")], others=others) == ["Wren: A courier."]
    # {{persona}} is the writer's own description, whoever's text it is written in.
    theirs = [PersonInfo("Wren", "Unlike {{persona}}")]
    assert only([marker("persona")], others=theirs, persona_description="Ada.") == [
        "Ada: Ada.\nWren: Unlike Ada."
    ]
    assert only([marker("persona")], others=[PersonInfo("Sable", " ")], persona_description="Ada.") == [
        "Ada."
    ]


def test_example_dialogue_splits_on_start_case_insensitively():
    prompt = assemble(make([marker("example_dialogue")]))
    assert prompt.messages == [
        {"role": "system", "content": "Example dialogue:\nAda: Hi\nMaren: Hello."},
        {"role": "system", "content": "Example dialogue:\nMaren: Storm's coming."},
    ]
    assert prompt.sections[0].messages == 2


def test_post_history_marker_uses_the_speaking_card():
    assert only([marker("post_history")]) == ["Stay gentle, Maren."]
    assert only([marker("post_history")], characters=[CardInfo("Maren")]) == []


def test_chat_history_marker_places_visible_history_with_roles():
    prompt = assemble(make([lit("top"), marker("chat_history"), lit("bottom")], history=chat(2)))
    assert prompt.messages == [
        {"role": "system", "content": "top"},
        {"role": "user", "content": "message 1"},
        {"role": "assistant", "content": "message 2"},
        {"role": "system", "content": "bottom"},
    ]


def test_unknown_marker_contributes_nothing():
    prompt = assemble(make([section(kind="marker", marker="nsfw", name="NSFW")]))
    assert prompt.messages == [] and prompt.sections[0].tokens == 0


# Memory


def test_memory_empty_adds_nothing():
    prompt = assemble(make([marker("memory")], memory_text=""))
    assert prompt.messages == []
    assert prompt.sections[0].messages == 0 and prompt.sections[0].tokens == 0


def test_memory_uses_the_template_and_macros():
    got = only(
        [marker("memory")], memory_text="{{char}} met {{user}}.", memory_template="Recall:\n{{memory}}"
    )
    assert got == ["Recall:\nMaren met Ada."]
    assert only([marker("memory")], memory_text="They met.") == ["Past events:\nThey met."]


# World info


def test_world_info_before_and_after_sorted_by_order():
    world = [
        WorldInsert("late", position=Position.BEFORE_CHAR, order=200),
        WorldInsert("early {{char}}", position=Position.BEFORE_CHAR, order=10),
        WorldInsert("after", position=Position.AFTER_CHAR),
    ]
    sections = [marker("world_info_before"), marker("char_description"), marker("world_info_after")]
    assert only(sections, world_info=world) == [
        "early Maren\nlate",
        "Maren keeps the lighthouse for Ada.",
        "after",
    ]


def test_world_info_examples_top_and_bottom_wrap_the_examples():
    world = [
        WorldInsert("bottom", position=Position.EXAMPLES_BOTTOM),
        WorldInsert("top", position=Position.EXAMPLES_TOP),
    ]
    got = only([marker("example_dialogue")], world_info=world)
    assert got[0] == "top" and got[-1] == "bottom" and len(got) == 4


def test_world_info_author_note_top_and_bottom():
    world = [
        WorldInsert("an bottom", position=Position.AN_BOTTOM),
        WorldInsert("an top", position=Position.AN_TOP),
    ]
    got = only(
        [marker("chat_history"), marker("authors_note")], world_info=world, authors_note="Note {{char}}"
    )
    assert got == ["an top\nNote Maren\nan bottom"]


def test_world_info_at_depth_uses_its_depth_and_role():
    world = [
        WorldInsert("deep", position=Position.AT_DEPTH, depth=2, role=1),
        WorldInsert("last", position=Position.AT_DEPTH, depth=0),
    ]
    prompt = assemble(make([marker("chat_history")], world_info=world, history=chat(3)))
    assert prompt.messages == [
        {"role": "user", "content": "message 1"},
        {"role": "user", "content": "deep"},
        {"role": "assistant", "content": "message 2"},
        {"role": "user", "content": "message 3"},
        {"role": "system", "content": "last"},
    ]
    report = prompt.sections[1]
    assert (report.name, report.messages, report.tokens) == ("World info (at depth)", 2, 2)


# Depth injection and the author's note


def test_authors_note_at_its_marker_depth_with_its_role():
    sections = [marker("chat_history"), marker("authors_note", injection="depth", depth=1)]
    prompt = assemble(
        make(sections, history=chat(3), authors_note="Keep it short.", authors_note_role="user")
    )
    assert contents(prompt) == ["message 1", "message 2", "Keep it short.", "message 3"]
    assert prompt.messages[2]["role"] == "user"


def test_authors_note_relative_marker_uses_the_input_depth():
    sections = [marker("chat_history"), marker("authors_note")]
    got = only(sections, history=chat(3), authors_note="AN", authors_note_depth=0)
    assert got == ["message 1", "message 2", "message 3", "AN"]


def test_empty_authors_note_adds_nothing():
    sections = [marker("chat_history"), marker("authors_note", injection="depth")]
    assert only(sections, history=chat(2)) == ["message 1", "message 2"]


def test_depth_injection_deeper_than_history_goes_to_the_start_of_the_block():
    sections = [
        lit("before"),
        marker("chat_history"),
        lit("deep", injection="depth", depth=9),
        lit("shallow", injection="depth", depth=5),
    ]
    got = only(sections, history=chat(2))
    assert got == ["before", "deep", "shallow", "message 1", "message 2"]


def test_depth_injections_at_one_depth_keep_section_order_and_report_in_section_order():
    sections = [
        marker("chat_history"),
        lit("first", name="First", injection="depth", depth=1),
        lit("second", name="Second", injection="depth", depth=1),
    ]
    prompt = assemble(make(sections, history=chat(2)))
    assert contents(prompt) == ["message 1", "first", "second", "message 2"]
    assert [(r.name, r.messages) for r in prompt.sections] == [
        ("Chat history", 2),
        ("First", 1),
        ("Second", 1),
    ]


def test_depth_injection_without_a_history_marker_goes_last():
    sections = [lit("top"), lit("injected", injection="depth", depth=4)]
    prompt = assemble(make(sections, history=chat(3)))
    assert contents(prompt) == ["top", "injected"]
    assert prompt.history_kept is None and prompt.history_dropped == 3


# History fitting


def test_history_fits_newest_first_within_a_small_context():
    # Fixed part: "sys" = 1 token; each message is 2 tokens; budget 10 - 3 = 7 -> three messages.
    prompt = assemble(
        make([lit("sys"), marker("chat_history")], history=chat(6), context_size=10, max_tokens=3)
    )
    assert contents(prompt) == ["sys", "message 4", "message 5", "message 6"]
    assert prompt.history_kept == (4, 6)
    assert prompt.history_dropped == 3
    assert (prompt.total_tokens, prompt.budget) == (7, 7)


def test_history_stops_at_the_first_message_that_does_not_fit():
    history = [
        HistoryMessage(1, "user", "Ada", "hi"),
        HistoryMessage(2, "assistant", "Maren", "a much longer message here"),
        HistoryMessage(3, "user", "Ada", "ok"),
    ]
    prompt = assemble(make([marker("chat_history")], history=history, context_size=4, max_tokens=1))
    assert contents(prompt) == ["ok"]
    assert prompt.history_kept == (3, 3) and prompt.history_dropped == 2


def test_history_kept_is_the_seq_range_of_the_included_messages():
    prompt = assemble(make([marker("chat_history")], history=chat(4, start=41)))
    assert prompt.history_kept == (41, 44) and prompt.history_dropped == 0


def test_hidden_messages_are_skipped_and_not_counted_as_dropped():
    history = chat(4)
    history[2] = HistoryMessage(3, "user", "Ada", "secret", hidden=True)
    prompt = assemble(make([marker("chat_history"), lit("AN", injection="depth", depth=1)], history=history))
    assert contents(prompt) == ["message 1", "message 2", "AN", "message 4"]
    assert prompt.history_kept == (1, 4) and prompt.history_dropped == 0


def test_fixed_part_over_budget_keeps_no_history_but_returns_the_prompt():
    prompt = assemble(
        make(
            [lit("one two three four five"), marker("chat_history")],
            history=chat(3),
            context_size=5,
            max_tokens=2,
        )
    )
    assert contents(prompt) == ["one two three four five"]
    assert prompt.history_kept is None and prompt.history_dropped == 3
    assert prompt.total_tokens == 5 and prompt.budget == 3


def test_prefix_names_prefixes_history_lines():
    prompt = assemble(make([marker("chat_history")], history=chat(2), prefix_names=True))
    assert contents(prompt) == ["Ada: message 1", "Maren: message 2"]
    assert prompt.total_tokens == 6


def test_precomputed_tokens_are_used_for_history():
    history = [HistoryMessage(seq, "user", "Ada", f"history {seq}", tokens=3) for seq in range(1, 5)]

    def count(text: str) -> int:
        if text.startswith("history"):
            raise AssertionError(f"counted a history text: {text}")
        return words(text)

    prompt = assemble(
        make(
            [lit("sys"), marker("chat_history")],
            history=history,
            count_tokens=count,
            context_size=8,
            max_tokens=0,
        )
    )
    assert prompt.history_kept == (3, 4)
    assert prompt.total_tokens == 7


def test_each_history_message_is_counted_at_most_once():
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return words(text)

    assemble(
        make([marker("chat_history")], history=chat(50), count_tokens=count, context_size=41, max_tokens=1)
    )
    history_calls = [text for text in calls if text.startswith("message")]
    assert len(history_calls) == len(set(history_calls)) == 21  # 20 fit, the 21st is where it stops


def test_macros_are_substituted_in_cards_but_not_in_history():
    history = [HistoryMessage(1, "user", "Ada", "I typed {{char}} and {{user}} literally")]
    got = only([marker("char_description"), marker("chat_history")], history=history)
    assert got == ["Maren keeps the lighthouse for Ada.", "I typed {{char}} and {{user}} literally"]


def test_default_token_counter():
    assert default_count_tokens("") == 0
    assert default_count_tokens("abcdefgh") == 3
    prompt = assemble(
        PromptInput(sections=[lit("abcd")], characters=[MAREN], speaker="Maren", user_name="Ada")
    )
    assert prompt.total_tokens == 2


# Modes


def test_continue_appends_a_system_nudge_last():
    prompt = assemble(make([marker("chat_history"), lit("end")], history=chat(1), mode="continue"))
    assert prompt.messages[-1] == {"role": "system", "content": CONTINUE_NUDGE}
    assert contents(prompt)[:-1] == ["message 1", "end"]
    assert prompt.sections[-1].name == "Continue"


def test_impersonate_appends_a_system_nudge_with_macros():
    prompt = assemble(make([marker("chat_history")], history=chat(1), mode="impersonate"))
    assert prompt.messages[-1] == {
        "role": "system",
        "content": (
            "[Write the next message as Ada, in Ada's voice and first person. Write only Ada's message.]"
        ),
    }


def test_group_nudge_goes_last_with_macros_and_only_in_normal_mode():
    sections = [marker("chat_history")]
    prompt = assemble(make(sections, history=chat(1), group_nudge="[Reply only as {{char}}.]"))
    assert prompt.messages[-1] == {"role": "system", "content": "[Reply only as Maren.]"}
    assert prompt.sections[-1].name == "Group nudge"
    continued = assemble(make(sections, history=chat(1), group_nudge="[x]", mode="continue"))
    assert continued.messages[-1] == {"role": "system", "content": CONTINUE_NUDGE}


# Reports, the default preset and speed


def test_reports_add_up_to_the_total():
    world = [WorldInsert("wi", position=Position.AT_DEPTH, depth=1)]
    prompt = assemble(
        make(default_sections(), history=chat(10), world_info=world, authors_note="AN", memory_text="Old.")
    )
    assert sum(r.tokens for r in prompt.sections) == prompt.total_tokens
    assert sum(r.messages for r in prompt.sections) == len(prompt.messages)
    assert prompt.total_tokens == sum(words(c) for c in contents(prompt))


def test_default_preset_produces_a_sensible_prompt_with_memory_in_its_place():
    prompt = assemble(
        make(
            default_sections(),
            history=chat(6),
            persona_description="{{user}} maps coastlines.",
            authors_note="Mood: tense.",
            memory_text="Maren rescued Ada from the wreck.",
        )
    )
    got = contents(prompt)
    assert got[0].startswith("You are Maren in an ongoing, immersive roleplay with Ada.")
    assert got[1:5] == [
        "Ada maps coastlines.",
        "Maren keeps the lighthouse for Ada.",
        "Maren's personality: Warm, patient.",
        "Scenario: A foggy island.",
    ]
    memory = got.index("Past events:\nMaren rescued Ada from the wreck.")
    assert got[memory - 1].startswith("Example dialogue:")
    assert got[memory + 1] == "message 1"
    assert got[memory + 1 :] == [
        "message 1",
        "message 2",
        "Mood: tense.",
        "message 3",
        "message 4",
        "message 5",
        "message 6",
        DEFAULT_POST_HISTORY.replace("{{char}}", "Maren").replace("{{user}}", "Ada"),
        "Stay gentle, Maren.",
    ]
    assert all(m["role"] == "system" for m in prompt.messages if not m["content"].startswith("message"))
    names = [r.name for r in prompt.sections]
    assert names.index("Memory") == names.index("Chat history") - 1
    assert prompt.history_kept == (1, 6)


def test_default_preset_without_memory_has_no_memory_message():
    prompt = assemble(make(default_sections(), history=chat(2)))
    assert not any(c.startswith("Past events") for c in contents(prompt))
    assert next(r for r in prompt.sections if r.name == "Memory").messages == 0


@pytest.mark.parametrize("mode", ["normal", "continue"])
def test_output_is_deterministic(mode):
    def build():
        return assemble(make(default_sections(), history=chat(8), authors_note="AN", mode=mode))

    assert build() == build()


def test_long_history_with_precomputed_tokens_is_fast():
    # The caller normally passes a tail; this proves a huge one still costs little.
    history = [
        HistoryMessage(seq, "user" if seq % 2 else "assistant", "X", "word " * 30, tokens=30)
        for seq in range(1, 10_001)
    ]
    started = time.perf_counter()
    prompt = assemble(
        PromptInput(
            sections=default_sections(),
            characters=[MAREN],
            speaker="Maren",
            user_name="Ada",
            history=history,
            context_size=8192,
        )
    )
    assert time.perf_counter() - started < 1.0
    assert prompt.history_kept is not None and prompt.history_kept[1] == 10_000
    assert prompt.total_tokens <= prompt.budget


# --- SillyTavern chat-completion presets keep their meaning ---------------------------------------


def st_preset(**jailbreak) -> list[dict]:
    """The sections of a SillyTavern chat-completion preset built from the format."""
    prompts = [
        {"identifier": "main", "name": "Main Prompt", "system_prompt": True, "content": "MAIN"},
        {"identifier": "charDescription", "name": "Char Description", "system_prompt": True, "marker": True},
        {"identifier": "chatHistory", "name": "Chat History", "system_prompt": True, "marker": True},
        {"identifier": "nsfw", "name": "Auxiliary Prompt", "system_prompt": True, "content": "AUX"},
        {"identifier": "jailbreak", "name": "Post-History", "content": "JB {{char}}", **jailbreak},
    ]
    identifiers = ("main", "charDescription", "chatHistory", "nsfw", "jailbreak")
    order = [{"identifier": i, "enabled": i != "nsfw"} for i in identifiers]
    raw = {"prompts": prompts, "prompt_order": [{"character_id": 100001, "order": order}]}
    return parse_chat_completion_preset(raw)[0]["sections"]


def st_prompt(sections: list[dict], **card) -> list[dict]:
    return assemble(
        PromptInput(
            sections=sections,
            characters=[CardInfo(name="Mira", description="DESC", **card)],
            speaker="Mira",
            user_name="You",
            history=chat(6),
            memory_text="MEMORY",
            authors_note="NOTE",
            authors_note_depth=2,
            world_info=[WorldInsert(content="AN-WORLD", position=Position.AN_TOP)],
            context_size=100_000,
        )
    ).messages


def test_a_sillytavern_preset_keeps_memory_the_authors_note_and_post_history_instructions():
    messages = [
        m["content"] for m in st_prompt(st_preset(), post_history_instructions="CARD PHI {{original}}")
    ]
    history = [m.text for m in chat(6)]
    assert messages[:2] == ["MAIN", "DESC"]
    assert messages[2:6] == history[:4]
    assert messages[6] == "AN-WORLD\nNOTE"  # at the note's own depth, with world info at the note
    assert messages[7:9] == history[4:]
    assert messages[9:] == ["Past events:\nMEMORY", "CARD PHI JB Mira"]
    assert "AUX" not in messages  # disabled in the prompt order


def test_the_preset_post_history_prompt_stands_when_the_card_has_none_or_overrides_are_forbidden():
    assert st_prompt(st_preset())[-1]["content"] == "JB Mira"
    forbidden = st_prompt(st_preset(forbid_overrides=True), post_history_instructions="CARD PHI")
    assert forbidden[-1]["content"] == "JB Mira"


# The card's Character's Note (SillyTavern's depth_prompt)


def test_a_characters_note_goes_in_at_its_depth_with_its_role():
    notes = [DepthPrompt(text="{{char}} hides a key from {{user}}.", char="Maren", depth=1, role="user")]
    prompt = assemble(make([marker("chat_history")], history=chat(3), depth_prompts=notes))
    assert prompt.messages == [
        {"role": "user", "content": "message 1"},
        {"role": "assistant", "content": "message 2"},
        {"role": "user", "content": "Maren hides a key from Ada."},
        {"role": "user", "content": "message 3"},
    ]
    assert ("Character's note", "marker", 6, 1) in [
        (r.name, r.kind, r.tokens, r.messages) for r in prompt.sections
    ]


def test_a_characters_note_at_depth_zero_comes_after_the_last_message():
    notes = [DepthPrompt(text="Stay in the fog.", char="Maren", depth=0, role="system")]
    assert only([marker("chat_history")], history=chat(2), depth_prompts=notes)[-1] == "Stay in the fog."


def test_each_characters_note_fills_char_with_its_own_card():
    notes = [
        DepthPrompt(text="{{char}} is wary.", char="Maren", depth=2),
        DepthPrompt(text="{{char}} is loud.", char="Tobin", depth=2),
    ]
    texts = only([marker("chat_history")], history=chat(4), depth_prompts=notes)
    assert texts == ["message 1", "message 2", "Maren is wary.", "Tobin is loud.", "message 3", "message 4"]


def test_at_one_depth_the_note_comes_after_the_authors_note_and_before_world_info():
    world = [WorldInsert(content="The lamp is lit.", position=Position.AT_DEPTH, depth=1)]
    notes = [DepthPrompt(text="Maren's note.", char="Maren", depth=1)]
    texts = only(
        [marker("chat_history"), marker("authors_note")],
        history=chat(2),
        authors_note="Author's note.",
        authors_note_depth=1,
        world_info=world,
        depth_prompts=notes,
    )
    assert texts == ["message 1", "Author's note.", "Maren's note.", "The lamp is lit.", "message 2"]


def test_no_characters_note_no_report_line():
    prompt = assemble(make([marker("chat_history")], history=chat(2)))
    assert "Character's note" not in [r.name for r in prompt.sections]


def test_a_nickname_is_char_in_each_cards_texts():
    tobin = CardInfo(name="Tobin Vale", description="{{char}} rows the boat.", nickname="Tob")
    texts = only([marker("char_description")], characters=[MAREN, tobin])
    assert texts == ["Maren: Maren keeps the lighthouse for Ada.\nTobin Vale: Tob rows the boat."]


# Prompt-cache friendly layout


def _cache_input(history, **kwargs) -> PromptInput:
    world = [
        WorldInsert(content="The island has one road.", constant=True),
        WorldInsert(content="The lamp is Fresnel glass."),
    ]
    return make(
        default_sections(),
        history=history,
        world_info=world,
        authors_note="Keep it quiet.",
        memory_text="Ada lost the brass key.",
        cache_friendly=True,
        **kwargs,
    )


def test_cache_mode_puts_memory_and_activated_world_info_with_the_note_at_its_depth():
    prompt = assemble(_cache_input(chat(10)))
    contents = [m["content"] for m in prompt.messages]
    volatile = {"Past events:\nAda lost the brass key.", "The lamp is Fresnel glass.", "Keep it quiet."}
    # The author's note keeps SillyTavern's default depth: four messages from the end.
    assert set(contents[prompt.stable_messages : prompt.stable_messages + 3]) == volatile
    newest = contents.index("message 10")
    assert contents[prompt.stable_messages + 3 : newest + 1] == [f"message {n}" for n in range(7, 11)]
    assert any("The island has one road." in text for text in contents[: prompt.stable_messages])
    assert contents[prompt.stable_messages - 1] == "message 6"


def test_cache_mode_honours_an_authors_note_depth_of_one():
    inp = _cache_input(chat(10))
    sections = [dict(s, depth=1) if s.get("marker") == "authors_note" else s for s in inp.sections]
    prompt = assemble(replace(inp, sections=sections))
    contents = [m["content"] for m in prompt.messages]
    assert contents[prompt.stable_messages - 1] == "message 9"
    assert contents[prompt.stable_messages + 3] == "message 10"


def test_cache_mode_keeps_the_prefix_when_the_chat_grows_and_memory_changes():
    first = assemble(_cache_input(chat(10)))
    later = assemble(replace(_cache_input(chat(12)), memory_text="Something else."))
    assert later.messages[: first.stable_messages] == first.messages[: first.stable_messages]


def test_classic_layout_is_unchanged_without_cache_mode():
    prompt = assemble(make(default_sections(), history=chat(4), memory_text="Ada lost the brass key."))
    contents = [m["content"] for m in prompt.messages]
    assert contents.index("Past events:\nAda lost the brass key.") < contents.index("message 1")
    assert prompt.stable_messages == 0


def test_history_drops_whole_blocks_when_aligned():
    # Each message is 2 tokens ("message N"); the budget keeps the newest 13 of 40.
    inp = make([marker("chat_history")], history=chat(40), context_size=26 + 400)
    assert assemble(inp).history_kept == (28, 40)
    aligned = assemble(replace(inp, history_align=8))
    assert aligned.history_kept == (32, 40)
    grown = assemble(replace(inp, history_align=8, history=chat(42)))
    assert grown.history_kept == (32, 42)


def test_an_aligned_window_never_drops_everything():
    inp = make([marker("chat_history")], history=chat(3, start=5), context_size=2 + 400, history_align=8)
    assert assemble(inp).history_kept == (7, 7)
