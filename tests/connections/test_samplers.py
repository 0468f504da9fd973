"""A preset's samplers under each text-completion backend's own names (pure)."""

from __future__ import annotations

from orbchat.connections.samplers import bans, sequence_breakers, text_params

PRESET = {
    "temperature": 0.7,
    "top_p": 0.9,
    "top_k": 40,
    "min_p": 0.05,
    "repetition_penalty": 1.1,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "max_tokens": 200,
    "seed": 7,
    "typical_p": 0.95,
    "tfs": 0.97,
    "top_a": 0.1,
    "rep_pen_range": 1024,
    "rep_pen_slope": 0.7,
    "mirostat_mode": 2,
    "mirostat_tau": 5,
    "mirostat_eta": 0.1,
    "smoothing_factor": 0.3,
    "smoothing_curve": 1.5,
    "dry_multiplier": 0.8,
    "dry_base": 1.75,
    "dry_allowed_length": 2,
    "dry_sequence_breakers": '["\\n", ":"]',
    "xtc_threshold": 0.1,
    "xtc_probability": 0.5,
    "banned_tokens": '"As an AI"\n[1234, 5]',
    "logit_bias": [{"text": "[42]", "value": -5}, {"text": "dragon", "value": 3}],
}
OPENAI_FIELDS = {
    "temperature": 0.7,
    "top_p": 0.9,
    "max_tokens": 200,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "seed": 7,
}


def test_llamacpp_reads_its_own_names_and_takes_text_biases_and_bans():
    params = text_params(PRESET, "llamacpp")
    body = params.pop("extra_body")
    assert params == OPENAI_FIELDS
    assert body == {
        "top_k": 40,
        "min_p": 0.05,
        "repeat_penalty": 1.1,
        "repeat_last_n": 1024,
        "typical_p": 0.95,
        "tfs_z": 0.97,
        "mirostat": 2,
        "mirostat_tau": 5,
        "mirostat_eta": 0.1,
        "dry_multiplier": 0.8,
        "dry_base": 1.75,
        "dry_allowed_length": 2,
        "dry_sequence_breakers": ["\n", ":"],
        "xtc_threshold": 0.1,
        "xtc_probability": 0.5,
        "logit_bias": [[42, -5], ["dragon", 3], [1234, False], [5, False], ["As an AI", False]],
    }


def test_text_generation_webui_reads_its_names_and_breakers_as_a_quoted_list():
    body = text_params(PRESET, "textgen")["extra_body"]
    assert body["repetition_penalty"] == 1.1 and body["repetition_penalty_range"] == 1024
    assert body["mirostat_mode"] == 2 and body["smoothing_curve"] == 1.5 and body["top_a"] == 0.1
    assert body["dry_sequence_breakers"] == '"\\n", ":"'
    assert body["banned_strings"] == ["As an AI"] and body["custom_token_bans"] == "1234,5"
    assert body["logit_bias"] == {"42": -5}
    assert "rep_pen_slope" not in body and "typical" not in body


def test_vllm_gets_only_what_it_reads():
    body = text_params(PRESET, "vllm")["extra_body"]
    assert body == {
        "top_k": 40,
        "min_p": 0.05,
        "repetition_penalty": 1.1,
        "bad_words": ["As an AI"],
        "logit_bias": {"42": -5, "1234": -100, "5": -100},
    }


def test_a_sampler_the_preset_does_not_set_is_not_sent():
    params = text_params({"temperature": 1.0, "top_k": 0}, "koboldcpp")
    assert params == {"temperature": 1.0, "extra_body": {"top_k": 0}}


def test_kobold_spellings_and_a_random_seed():
    params = text_params({"temp": 0.5, "typical": 0.9, "mirostat": 1, "seed": -1, "genamt": 80}, "koboldcpp")
    assert params == {"temperature": 0.5, "max_tokens": 80, "extra_body": {"typical": 0.9, "mirostat": 1}}


def test_banned_lines_and_breakers_are_read_as_sillytavern_writes_them():
    assert bans('"exact phrase"\n[1, 2]\nplain words\n\n') == (["exact phrase", "plain words"], [1, 2])
    assert sequence_breakers(["\n"]) == ["\n"]
    assert sequence_breakers('["*", "\\""]') == ["*", '"']
    assert sequence_breakers("*, :") == ["*", ":"]


def test_dynamic_temperature_is_the_middle_with_the_spread_as_each_server_says_it():
    preset = {"temperature": 1.0, "dynatemp": True, "min_temp": 0.5, "max_temp": 1.5, "dynatemp_exponent": 1}
    kobold = text_params(preset, "koboldcpp")
    assert kobold["temperature"] == 1.0
    assert kobold["extra_body"] == {"dynatemp_range": 0.5, "dynatemp_exponent": 1}
    textgen = text_params(preset, "textgen")["extra_body"]
    assert textgen == {
        "dynamic_temperature": True,
        "dynatemp_low": 0.5,
        "dynatemp_high": 1.5,
        "dynatemp_exponent": 1,
    }
    assert text_params({**preset, "dynatemp": False}, "koboldcpp") == {"temperature": 1.0}


def test_sampler_order_and_eos_go_to_the_servers_that_read_them():
    preset = {"sampler_order": [6, 0, 1], "samplers": ["top_k", "min_p"], "ban_eos_token": True}
    assert text_params(preset, "koboldcpp")["extra_body"] == {"sampler_order": [6, 0, 1]}
    assert text_params(preset, "llamacpp")["extra_body"] == {
        "samplers": ["top_k", "min_p"],
        "ignore_eos": True,
    }
    assert text_params(preset, "vllm")["extra_body"] == {"ignore_eos": True}
