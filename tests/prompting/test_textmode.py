"""A turn assembled for a chat model, then written as one text-completion prompt (pure)."""

from __future__ import annotations

from orbchat.library.presets import default_sections
from orbchat.prompting import formats
from orbchat.prompting.assemble import (
    CardInfo,
    HistoryMessage,
    PersonInfo,
    PromptInput,
    WorldInsert,
    assemble,
)
from orbchat.prompting.instruct import Context, Instruct
from orbchat.prompting.textmode import TextFormat, prepare, render
from orbchat.prompting.worldinfo import Position

CHATML = TextFormat(
    instruct=Instruct.from_st(formats.INSTRUCT["ChatML"]), context=Context.from_st(formats.CONTEXT["ChatML"])
)


def turn(**changes) -> PromptInput:
    values = dict(
        sections=default_sections(),
        characters=[CardInfo(name="Aria", description="A bard.", post_history_instructions="Stay brief.")],
        speaker="Aria",
        user_name="Sam",
        history=[
            HistoryMessage(seq=0, role="assistant", name="Aria", text="Welcome!"),
            HistoryMessage(seq=1, role="user", name="Sam", text="Sing."),
        ],
        authors_note="[Mood: gloomy]",
        authors_note_depth=1,
        world_info=[
            WorldInsert(content="The tavern is old.", position=Position.BEFORE_CHAR),
            WorldInsert(content="It rains.", position=Position.AT_DEPTH, depth=0),
        ],
        memory_text="They met last winter.",
    )
    values.update(changes)
    return PromptInput(**values)


def written(inp: PromptInput, fmt: TextFormat = CHATML) -> str:
    prepared = prepare(inp, fmt)
    return render(inp, prepared, assemble(prepared), fmt).text


def test_story_string_then_memory_then_the_chat_with_the_note_and_world_info_at_their_depths():
    text = written(turn())
    # The preset's main prompt is the system prompt, first in the story string.
    assert text.startswith("<|im_start|>system\nYou are Aria in an ongoing, immersive roleplay with Sam.")
    head, chat = text.split("<|im_start|>assistant\nAria: Welcome!", 1)
    assert "The tavern is old.\nA bard.<|im_end|>\n" in head
    # The default preset's author's note sits at depth 4: before both messages of this short chat.
    assert head.endswith(
        "<|im_start|>system\nPast events:\nThey met last winter.<|im_end|>\n"
        "<|im_start|>system\n[Mood: gloomy]<|im_end|>\n"
    )
    assert chat == (
        "<|im_end|>\n"
        "<|im_start|>user\nSam: Sing.<|im_end|>\n"
        "<|im_start|>system\nIt rains.<|im_end|>\n"
        "<|im_start|>assistant\nAria:"
    )


def test_post_history_instructions_only_when_the_context_template_allows_them():
    assert "Stay brief." not in written(turn())
    allowed = TextFormat(instruct=CHATML.instruct, context=CHATML.context, allow_post_history=True)
    assert "<|im_start|>system\nStay brief.<|im_end|>" in written(turn(), allowed)


def test_a_chosen_system_prompt_replaces_the_main_prompt_and_a_cards_own_replaces_both():
    chosen = TextFormat(instruct=CHATML.instruct, context=CHATML.context, system_prompt="Narrate well.")
    assert written(turn(), chosen).startswith("<|im_start|>system\nNarrate well.\n")
    card = CardInfo(name="Aria", system_prompt="Be {{char}}. {{original}}")
    assert written(turn(characters=[card]), chosen).startswith("<|im_start|>system\nBe Aria. Narrate well.\n")


def test_the_budget_leaves_room_for_the_story_and_the_sequences():
    long = [HistoryMessage(seq=i, role="user", name="Sam", text="word " * 40) for i in range(200)]
    inp = turn(history=long, context_size=2000, max_tokens=200, memory_text="", authors_note="")
    prepared = prepare(inp, CHATML)
    prompt = assemble(prepared)
    text = render(inp, prepared, prompt, CHATML).text
    assert 0 < prompt.history_dropped < 200
    assert len(text) // 4 + 1 <= 2000 - 200  # the default counter: a quarter of the characters


def test_the_story_strings_persona_lists_a_shared_rooms_other_people():
    shared = written(
        turn(persona_description="{{user}} keeps the ledger.", others=[PersonInfo("Wren", "{{user}} rows.")])
    )
    assert "Sam: Sam keeps the ledger.\nWren: Wren rows." in shared
    assert "Sam keeps the ledger." in written(turn(persona_description="{{user}} keeps the ledger."))
    assert "Sam: Sam keeps" not in written(turn(persona_description="{{user}} keeps the ledger."))
