"""The instruct and context templates OrbChat ships, in SillyTavern's fields (pure data).

Each is written from the model family's documented chat format and SillyTavern's field meanings;
a person's own imported templates sit beside them. Each instruct template carries an
`activation_regex` over model names (SillyTavern's own bundled files leave theirs empty), so
"Automatic (by model name)" finds the family; the order below is the order they are tried in
(ChatML first: a Hermes or Dolphin fine-tune of Llama or Mistral speaks ChatML).
"""

from __future__ import annotations


def _story(open_: str = "", close: str = "", *, personality_label: bool = True) -> str:
    personality = "{{char}}'s personality: {{personality}}" if personality_label else "{{personality}}"
    scenario = "Scenario: {{scenario}}" if personality_label else "{{scenario}}"
    body = (
        "{{#if system}}{{system}}\n{{/if}}{{#if wiBefore}}{{wiBefore}}\n{{/if}}"
        "{{#if description}}{{description}}\n{{/if}}"
        f"{{{{#if personality}}}}{personality}\n{{{{/if}}}}"
        f"{{{{#if scenario}}}}{scenario}\n{{{{/if}}}}"
        "{{#if wiAfter}}{{wiAfter}}\n{{/if}}{{#if persona}}{{persona}}\n{{/if}}"
    )
    return f"{open_}{body}{{{{trim}}}}{close}" if close else f"{open_}{body}"


INSTRUCT: dict[str, dict] = {
    "ChatML": {
        "activation_regex": "/chatml|qwen|hermes|dolphin/i",
        "input_sequence": "<|im_start|>user",
        "output_sequence": "<|im_start|>assistant",
        "system_sequence": "<|im_start|>system",
        "input_suffix": "<|im_end|>\n",
        "output_suffix": "<|im_end|>\n",
        "system_suffix": "<|im_end|>\n",
        "stop_sequence": "<|im_end|>",
        "wrap": True,
        "macro": True,
        "names_behavior": "always",
        "system_same_as_user": False,
    },
    "Llama 3 Instruct": {
        "activation_regex": "/llama[-_ .]?3/i",
        "input_sequence": "<|start_header_id|>user<|end_header_id|>\n\n",
        "output_sequence": "<|start_header_id|>assistant<|end_header_id|>\n\n",
        "system_sequence": "<|start_header_id|>system<|end_header_id|>\n\n",
        "input_suffix": "<|eot_id|>",
        "output_suffix": "<|eot_id|>",
        "system_suffix": "<|eot_id|>",
        "stop_sequence": "<|eot_id|>",
        "wrap": False,
        "macro": True,
        "names_behavior": "always",
        "system_same_as_user": True,
    },
    "Mistral V2 & V3": {
        "activation_regex": "/mistral|mixtral/i",
        "input_sequence": "[INST] ",
        "output_sequence": "[/INST] ",
        "last_output_sequence": "[/INST]",
        "output_suffix": "</s>",
        "wrap": False,
        "macro": True,
        "names_behavior": "always",
        "system_same_as_user": True,
        "user_alignment_message": (
            "Let's get started. Please respond based on the information and instructions provided above."
        ),
    },
    "Alpaca": {
        "activation_regex": "/alpaca/i",
        "input_sequence": "### Instruction:",
        "output_sequence": "### Response:",
        "system_sequence": "### Input:",
        "input_suffix": "\n\n",
        "output_suffix": "\n\n",
        "system_suffix": "\n\n",
        "wrap": True,
        "macro": True,
        "names_behavior": "force",
        "system_same_as_user": False,
    },
    "Vicuna 1.1": {
        "activation_regex": "/vicuna/i",
        "input_sequence": "\nUSER: ",
        "output_sequence": "\nASSISTANT: ",
        "output_suffix": "</s>",
        "system_sequence_prefix": "BEGINNING OF CONVERSATION:",
        "wrap": False,
        "macro": True,
        "names_behavior": "force",
        "system_same_as_user": True,
    },
    "Gemma 2": {
        "activation_regex": "/gemma/i",
        "input_sequence": "<start_of_turn>user",
        "output_sequence": "<start_of_turn>model",
        "system_sequence": "<start_of_turn>system",
        "input_suffix": "<end_of_turn>\n",
        "output_suffix": "<end_of_turn>\n",
        "system_suffix": "<end_of_turn>\n",
        "stop_sequence": "<end_of_turn>",
        "wrap": True,
        "macro": True,
        "names_behavior": "none",
        "system_same_as_user": True,
    },
    "Metharme": {
        "activation_regex": "/metharme|pygmalion-2/i",
        "input_sequence": "<|user|>",
        "output_sequence": "<|model|>",
        "stop_sequence": "</s>",
        "system_sequence_prefix": "<|system|>",
        "wrap": False,
        "macro": True,
        "names_behavior": "force",
        "system_same_as_user": True,
    },
}

CONTEXT: dict[str, dict] = {
    "Default": {"story_string": _story(), "example_separator": "***", "chat_start": "***"},
    "ChatML": {"story_string": _story("<|im_start|>system\n", "<|im_end|>")},
    "Llama 3 Instruct": {
        "story_string": _story("<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>")
    },
    "Mistral V2 & V3": {
        "story_string": _story("[INST] ", "[/INST] Understood.</s>", personality_label=False)
    },
    "Alpaca": {"story_string": _story() + "\n\n"},
    "Gemma 2": {"story_string": _story("<start_of_turn>user\n", "<end_of_turn>")},
}

# What "Automatic (by model name)" falls back to when no template's activation regex matches.
DEFAULT_INSTRUCT = "ChatML"
DEFAULT_CONTEXT = "ChatML"


def context_for(instruct_name: str) -> str:
    """The bundled context template that goes with a bundled instruct template."""
    return instruct_name if instruct_name in CONTEXT else "Default"
