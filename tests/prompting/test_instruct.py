"""Text-completion prompts written as SillyTavern writes them (public/scripts/instruct-mode.js,
power-user.js renderStoryString, script.js Generate/getStoppingStrings).

Each expected text is worked out by hand from those functions' rules for the case at hand.
"""

from __future__ import annotations

from orbchat.prompting import formats
from orbchat.prompting.instruct import (
    Context,
    Instruct,
    StoryFields,
    Turn,
    render,
    render_messages,
    render_story_string,
)
from orbchat.prompting.macros import MacroContext, substitute

CTX = MacroContext(char="Aria", user="Sam")


def sub(text: str) -> str:
    return substitute(text, CTX)


def bundled(name: str, context: str | None = None) -> tuple[Instruct, Context]:
    return Instruct.from_st(formats.INSTRUCT[name]), Context.from_st(formats.CONTEXT[context or name])


STORY = StoryFields(
    char="Aria",
    user="Sam",
    system="You are {{char}}.",
    description="A bard.",
    scenario="A tavern.",
    examples="<START>\n{{user}}: Hi\n{{char}}: Hello!",
)
CHAT = [Turn("assistant", "Welcome!", "Aria"), Turn("user", "Sing.", "Sam")]


def test_chatml_with_names_examples_and_system_prompt():
    ins, ctx = bundled("ChatML")
    prompt = render(instruct=ins, context=ctx, story=STORY, turns=CHAT, substitute=sub)
    assert prompt.text == (
        "<|im_start|>system\nYou are Aria.\nA bard.\nScenario: A tavern.<|im_end|>\n"
        "<|im_start|>user\nSam: Hi<|im_end|>\n"
        "<|im_start|>assistant\nAria: Hello!<|im_end|>\n"
        "<|im_start|>assistant\nAria: Welcome!<|im_end|>\n"
        "<|im_start|>user\nSam: Sing.<|im_end|>\n"
        "<|im_start|>assistant\nAria:"
    )
    assert prompt.stop == [
        "\nSam:",
        "\n<|im_end|>",
        "\n<|im_start|>user",
        "\n<|im_start|>assistant",
        "\n<|im_start|>system",
    ]


def test_chatml_without_names_ends_with_an_open_assistant_line():
    ins, ctx = bundled("ChatML")
    ins = Instruct(**{**vars(ins), "names_behavior": "none"})
    story = StoryFields(char="Aria", user="Sam", description="A bard.")
    prompt = render(instruct=ins, context=ctx, story=story, turns=CHAT, substitute=sub)
    assert prompt.text == (
        "<|im_start|>system\nA bard.<|im_end|>\n"
        "<|im_start|>assistant\nWelcome!<|im_end|>\n"
        "<|im_start|>user\nSing.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_llama3_without_wrap_joins_sequences_directly_and_stops_without_newlines():
    ins, ctx = bundled("Llama 3 Instruct")
    prompt = render(instruct=ins, context=ctx, story=STORY, turns=CHAT, substitute=sub)
    assert prompt.text == (
        "<|start_header_id|>system<|end_header_id|>\n\nYou are Aria.\nA bard.\nScenario: A tavern.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nSam: Hi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nAria: Hello!<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nAria: Welcome!<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nSam: Sing.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nAria:"
    )
    assert "<|eot_id|>" in prompt.stop and "<|start_header_id|>user<|end_header_id|>" in prompt.stop


def test_llama3_writes_a_system_message_as_the_user_when_system_same_as_user():
    ins, ctx = bundled("Llama 3 Instruct")
    story = StoryFields(char="Aria", user="Sam")
    turns = [Turn("user", "Hi.", "Sam"), Turn("system", "[It starts to rain.]")]
    prompt = render(instruct=ins, context=ctx, story=story, turns=turns, substitute=sub)
    assert "<|start_header_id|>user<|end_header_id|>\n\n[It starts to rain.]<|eot_id|>" in prompt.text
    assert "System:" not in prompt.text


def test_alpaca_force_names_only_the_example_user_in_a_solo_chat():
    ins, ctx = bundled("Alpaca")
    prompt = render(instruct=ins, context=ctx, story=STORY, turns=CHAT, substitute=sub)
    assert prompt.text == (
        "You are Aria.\nA bard.\nScenario: A tavern.\n\n\n"
        "### Instruction:\nSam: Hi\n\n"
        "### Response:\nHello!\n\n"
        "### Response:\nWelcome!\n\n"
        "### Instruction:\nSing.\n\n"
        "### Response:\n"
    )
    assert prompt.stop == ["\nSam:", "\n### Instruction:", "\n### Response:", "\n### Input:"]


def test_alpaca_force_names_characters_in_a_group():
    ins, ctx = bundled("Alpaca")
    turns = [Turn("assistant", "Welcome!", "Bram"), Turn("user", "Sing.", "Sam")]
    story = StoryFields(char="Aria", user="Sam")
    prompt = render(
        instruct=ins, context=ctx, story=story, turns=turns, substitute=sub, group=True, others=("Bram",)
    )
    assert "### Response:\nBram: Welcome!\n\n" in prompt.text
    assert "### Instruction:\nSing.\n\n" in prompt.text  # force never names the user's own lines
    assert prompt.text.endswith("### Response:\nAria:")
    assert "\nBram:" in prompt.stop


def test_a_missing_system_sequence_leaves_system_text_bare():
    ins = Instruct(input_sequence="<u>", output_sequence="<a>", names_behavior="none", wrap=True)
    story = StoryFields(char="Aria", user="Sam")
    turns = [Turn("user", "Hi.", "Sam"), Turn("system", "Memory: they met before.")]
    prompt = render(instruct=ins, context=Context(story_string=""), story=story, turns=turns, substitute=sub)
    assert prompt.text == "<u>\nHi.\nMemory: they met before.\n<a>\n"


def test_first_and_last_output_sequences_and_the_last_input_sequence():
    ins = Instruct(
        input_sequence="<u>",
        last_input_sequence="<u-last>",
        output_sequence="<a>",
        first_output_sequence="<a-first>",
        last_output_sequence="<a-last>",
        names_behavior="none",
        wrap=False,
    )
    story = StoryFields(char="Aria", user="Sam")
    turns = [
        Turn("assistant", "One.", "Aria"),
        Turn("user", "Two.", "Sam"),
        Turn("assistant", "Three.", "Aria"),
        Turn("user", "Four.", "Sam"),
    ]
    prompt = render(instruct=ins, context=Context(story_string=""), story=story, turns=turns, substitute=sub)
    assert prompt.text == "<a-first>One.<u>Two.<a>Three.<u-last>Four.<a-last>"
    cut = render(
        instruct=ins,
        context=Context(story_string=""),
        story=story,
        turns=turns,
        substitute=sub,
        chat_begins=False,
    )
    assert cut.text.startswith("<a>One.")


def test_continue_leaves_the_last_message_open_without_suffix_or_reply_line():
    ins, ctx = bundled("ChatML")
    story = StoryFields(char="Aria", user="Sam")
    turns = [Turn("user", "Sing.", "Sam"), Turn("assistant", "La la", "Aria")]
    prompt = render(instruct=ins, context=ctx, story=story, turns=turns, substitute=sub, mode="continue")
    assert prompt.text.endswith("<|im_start|>assistant\nAria: La la")


def test_impersonate_opens_a_line_for_the_user():
    ins, ctx = bundled("ChatML")
    story = StoryFields(char="Aria", user="Sam")
    prompt = render(instruct=ins, context=ctx, story=story, turns=CHAT, substitute=sub, mode="impersonate")
    assert prompt.text.endswith("<|im_start|>user\nSam:")
    assert prompt.stop[0] == "\nAria:"


def test_mistral_adds_the_user_alignment_message_and_the_name_filler():
    ins, ctx = bundled("Mistral V2 & V3")
    story = StoryFields(char="Aria", user="Sam", description="A bard.")
    turns = [Turn("assistant", "Welcome!", "Aria"), Turn("user", "Sing.", "Sam")]
    prompt = render(instruct=ins, context=ctx, story=story, turns=turns, substitute=sub)
    assert prompt.text == (
        "[INST] A bard.[/INST] Understood.</s>"
        "[INST] Sam: Let's get started. Please respond based on the information and instructions "
        "provided above.[/INST] Aria: Welcome!</s>"
        "[INST] Sam: Sing.[/INST] Aria:"
    )


def test_without_instruct_lines_are_name_prefixed_and_the_default_separators_apply():
    ctx = Context.from_st(formats.CONTEXT["Default"] | {"use_stop_strings": True})
    prompt = render(instruct=None, context=ctx, story=STORY, turns=CHAT, substitute=sub)
    assert prompt.text == (
        "You are Aria.\nA bard.\nScenario: A tavern.\n"
        "***\nSam: Hi\nAria: Hello!\n"
        "***\nAria: Welcome!\nSam: Sing.\nAria:"
    )
    assert prompt.stop == ["\nSam:", "\n***"]


def test_story_string_blocks_else_unless_trim_and_newlines():
    template = (
        "\n\n{{#if scenario}}S: {{scenario}}{{else}}No scenario{{/if}}\n"
        "{{#unless persona}}No persona{{/unless}}\n{{#if description}}D: {{description}}\n{{/if}}"
        "{{char}} and {{user}}{{trim}}\n\nEND"
    )
    out = render_story_string(
        template,
        {"scenario": "", "persona": "", "description": "x", "char": "Aria", "user": "Sam"},
        sub,
        instruct=None,
    )
    assert out == "No scenario\nNo persona\nD: x\nAria and SamEND\n"
    assert render_story_string("A", {}, sub, instruct=Instruct(wrap=False)) == "A"


def test_a_story_string_with_mes_examples_places_them_once():
    ctx = Context(story_string="{{description}}\n{{mesExamples}}")
    prompt = render(instruct=None, context=ctx, story=STORY, turns=CHAT, substitute=sub)
    assert prompt.text.count("Sam: Hi") == 1
    assert prompt.text.startswith("A bard.\nSam: Hi\nAria: Hello!\n")


def test_older_templates_names_flags_are_read():
    assert Instruct.from_st({"names": True}).names_behavior == "always"
    assert Instruct.from_st({"names": False, "names_force_groups": True}).names_behavior == "force"
    assert Instruct.from_st({"names": False, "names_force_groups": False}).names_behavior == "none"
    assert Instruct.from_st({"names_behavior": "always", "names": False}).names_behavior == "always"


def test_the_system_sequence_prefix_wraps_the_system_prompt():
    ins, _ = bundled("Vicuna 1.1", "Default")
    story = StoryFields(char="Aria", user="Sam", system="Be kind.")
    prompt = render(
        instruct=ins, context=Context(), story=story, turns=[Turn("user", "Hi.", "Sam")], substitute=sub
    )
    assert prompt.text.startswith("BEGINNING OF CONVERSATION:Be kind.\n")
    assert prompt.text.endswith("\nUSER: Hi.\nASSISTANT: ")


# The story string's place (a context template's story_string_position/_depth/_role, newer files).


def in_chat(depth: int, role: int = 0) -> Context:
    return Context.from_st(
        {
            "story_string": "{{description}}",
            "story_string_position": 1,
            "story_string_depth": depth,
            "story_string_role": role,
        }
    )


BARD = StoryFields(char="Aria", user="Sam", description="A bard.")
CHATML_INS = Instruct.from_st(formats.INSTRUCT["ChatML"])


def test_in_chat_at_depth_one_the_story_string_is_system_text_before_the_newest_message():
    prompt = render(instruct=CHATML_INS, context=in_chat(1), story=BARD, turns=CHAT, substitute=sub)
    assert prompt.text == (
        "<|im_start|>assistant\nAria: Welcome!<|im_end|>\n"
        "<|im_start|>system\nA bard.<|im_end|>\n"
        "<|im_start|>user\nSam: Sing.<|im_end|>\n"
        "<|im_start|>assistant\nAria:"
    )


def test_in_chat_at_depth_zero_as_the_user_it_is_the_users_line_after_the_newest_message():
    prompt = render(instruct=CHATML_INS, context=in_chat(0, role=1), story=BARD, turns=CHAT, substitute=sub)
    assert prompt.text == (
        "<|im_start|>assistant\nAria: Welcome!<|im_end|>\n"
        "<|im_start|>user\nSam: Sing.<|im_end|>\n"
        "<|im_start|>user\nSam: A bard.<|im_end|>\n"
        "<|im_start|>assistant\nAria:"
    )


def test_in_chat_deeper_than_the_chat_as_the_character_it_opens_the_chat():
    prompt = render(instruct=CHATML_INS, context=in_chat(9, role=2), story=BARD, turns=CHAT, substitute=sub)
    assert prompt.text.startswith(
        "<|im_start|>assistant\nAria: A bard.<|im_end|>\n<|im_start|>assistant\nAria: Welcome!<|im_end|>\n"
    )


def test_in_chat_depth_counts_chat_messages_and_follows_what_is_injected_there():
    turns = [CHAT[0], Turn("system", "[Mood: gloomy]", injected=True), CHAT[1]]
    prompt = render(instruct=CHATML_INS, context=in_chat(1), story=BARD, turns=turns, substitute=sub)
    assert (
        "<|im_start|>system\n[Mood: gloomy]<|im_end|>\n"
        "<|im_start|>system\nA bard.<|im_end|>\n"
        "<|im_start|>user\nSam: Sing.<|im_end|>\n"
    ) in prompt.text


def test_in_chat_the_examples_and_chat_start_stay_at_the_top():
    ctx = Context.from_st(
        {"story_string": "{{description}}", "chat_start": "***", "story_string_position": 1}
    )
    story = StoryFields(char="Aria", user="Sam", description="A bard.", examples="<START>\n{{user}}: Hi")
    prompt = render(instruct=None, context=ctx, story=story, turns=CHAT, substitute=sub)
    # Depth 1 by default, system text written bare without an instruct template.
    assert prompt.text == "Sam: Hi\n***\nAria: Welcome!\nA bard.\nSam: Sing.\nAria:"


def test_continuing_at_depth_zero_keeps_the_continued_message_last():
    turns = [Turn("user", "Sing.", "Sam"), Turn("assistant", "La la", "Aria")]
    prompt = render(
        instruct=CHATML_INS, context=in_chat(0), story=BARD, turns=turns, substitute=sub, mode="continue"
    )
    assert prompt.text.endswith("<|im_start|>system\nA bard.<|im_end|>\n<|im_start|>assistant\nAria: La la")


def test_in_prompt_and_before_prompt_both_open_the_prompt_as_in_sillytavern():
    for position in (0, 2, "2", 7):
        ctx = Context.from_st({"story_string": "{{description}}", "story_string_position": position})
        prompt = render(instruct=CHATML_INS, context=ctx, story=BARD, turns=CHAT, substitute=sub)
        assert prompt.text.startswith("A bard.\n<|im_start|>assistant\nAria: Welcome!"), position


def test_the_instruct_story_string_prefix_and_suffix_wrap_it_at_the_top_only():
    ins = Instruct.from_st(
        {
            **formats.INSTRUCT["ChatML"],
            "story_string_prefix": "<|im_start|>{{name}}",
            "story_string_suffix": "<|im_end|>\n",
        }
    )
    top = render(
        instruct=ins, context=Context(story_string="{{description}}"), story=BARD, turns=CHAT, substitute=sub
    )
    assert top.text.startswith(
        "<|im_start|>System\nA bard.\n<|im_end|>\n<|im_start|>assistant\nAria: Welcome!"
    )
    chat = render(instruct=ins, context=in_chat(1), story=BARD, turns=CHAT, substitute=sub)
    assert "<|im_start|>system\nA bard.<|im_end|>\n" in chat.text and "System" not in chat.text


def test_story_string_numbers_are_read_from_numbers_and_text_and_bad_ones_keep_the_default():
    ctx = Context.from_st({"story_string_position": "1", "story_string_depth": 3.0, "story_string_role": 2})
    assert (ctx.story_string_position, ctx.story_string_depth, ctx.story_string_role) == (1, 3, 2)
    odd = Context.from_st({"story_string_position": "top", "story_string_depth": -4, "story_string_role": 9})
    assert (odd.story_string_position, odd.story_string_depth, odd.story_string_role) == (0, 0, 0)


# A task's messages (the Utility model's summary requests) written with an instruct template.

TASK = [{"role": "system", "content": "You summarise."}, {"role": "user", "content": "Transcript:\n#1 A: hi"}]


def test_task_messages_with_chatml_take_the_system_and_user_sequences_then_open_the_reply():
    written = render_messages(CHATML_INS, TASK)
    assert written.text == (
        "<|im_start|>system\nYou summarise.<|im_end|>\n"
        "<|im_start|>user\nTranscript:\n#1 A: hi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert written.stop == [
        "\n<|im_end|>",
        "\n<|im_start|>user",
        "\n<|im_start|>assistant",
        "\n<|im_start|>system",
    ]


def test_task_messages_with_llama3_write_system_text_as_the_user_without_wrap():
    written = render_messages(Instruct.from_st(formats.INSTRUCT["Llama 3 Instruct"]), TASK)
    assert written.text == (
        "<|start_header_id|>user<|end_header_id|>\n\nYou summarise.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nTranscript:\n#1 A: hi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    assert written.stop[0] == "<|eot_id|>"


def test_task_messages_use_the_system_prefix_when_the_template_has_no_system_sequence():
    written = render_messages(Instruct.from_st(formats.INSTRUCT["Metharme"]), TASK)
    assert written.text == "<|system|>You summarise.<|user|>Transcript:\n#1 A: hi<|model|>"


def test_task_messages_open_the_reply_with_the_last_system_sequence_when_there_is_one():
    ins = Instruct.from_st({**formats.INSTRUCT["ChatML"], "last_system_sequence": "<|im_start|>narrator"})
    assert render_messages(ins, TASK).text.endswith("<|im_end|>\n<|im_start|>narrator\n")


def test_task_messages_without_an_instruct_template_are_one_line_each():
    written = render_messages(None, TASK)
    assert (written.text, written.stop) == ("You summarise.\nTranscript:\n#1 A: hi\n", [])
