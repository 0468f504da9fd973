"""Text-completion prompts written as SillyTavern writes them (public/scripts/instruct-mode.js,
power-user.js renderStoryString, script.js Generate/getStoppingStrings).

Each expected text is worked out by hand from those functions' rules for the case at hand.
"""

from __future__ import annotations

from orbchat.prompting import formats
from orbchat.prompting.instruct import Context, Instruct, StoryFields, Turn, render, render_story_string
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
