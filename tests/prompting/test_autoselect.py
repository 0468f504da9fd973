"""A template chosen by the model's name, as SillyTavern's autoSelectInstructPreset chooses (pure)."""

from __future__ import annotations

from orbchat.prompting import formats
from orbchat.prompting.autoselect import activation_pattern, first_match


def test_slashes_and_flags_or_a_bare_pattern_as_sillytavern_reads_them():
    assert activation_pattern("/llama-?3/i").search("Meta-LLAMA-3-8B")
    assert not activation_pattern("/llama-?3/").search("Meta-LLAMA-3-8B")
    assert activation_pattern("mistral").search("my-mistral-7b")
    # Letters after the last slash that are not flags: the whole text is the pattern.
    assert activation_pattern("/models/q").search("/models/q")


def test_an_invalid_or_empty_regex_is_skipped():
    for text in ("/(unclosed/i", "[", "", None, 42, "/abc/x"):
        assert activation_pattern(text) is None, text


def test_the_first_matching_template_in_order_wins_and_broken_ones_are_passed_over():
    candidates = [("broken", "/(/"), ("none", ""), ("llama", "/llama/i"), ("any", "/.*/")]
    assert first_match(candidates, "Llama-3.1-8B") == "llama"
    assert first_match([("broken", "/(/")], "Llama") is None


def test_a_pattern_that_backtracks_for_ever_is_passed_over_in_time():
    model = "a" * 40 + "!"
    assert first_match([("slow", "/^(a+)+$/"), ("llama", "/a!/")], model) == "llama"


def test_the_bundled_templates_find_their_families():
    bundled = [(name, data["activation_regex"]) for name, data in formats.INSTRUCT.items()]
    expected = {
        "Qwen2.5-14B-Instruct": "ChatML",
        "Hermes-3-Llama-3.1-8B": "ChatML",
        "Meta-Llama-3.1-8B-Instruct": "Llama 3 Instruct",
        "llama3.2:3b": "Llama 3 Instruct",
        "Mistral-Small-24B-Instruct": "Mistral V2 & V3",
        "Mixtral-8x7B-Instruct": "Mistral V2 & V3",
        "gemma-2-9b-it": "Gemma 2",
        "vicuna-13b-v1.5": "Vicuna 1.1",
        "Pygmalion-2-13B": "Metharme",
        "local-model": None,
    }
    assert {model: first_match(bundled, model) for model in expected} == expected
