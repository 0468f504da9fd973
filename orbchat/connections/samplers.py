"""A preset's samplers as each text-completion backend names them (pure).

A preset keeps SillyTavern's names (`rep_pen_range`, `typical_p`, `mirostat_mode`, `dry_*`, …);
KoboldCpp, llama.cpp's server, text-generation-webui and vLLM each read their own. `text_params`
returns the OpenAI `/v1/completions` fields (temperature, top_p, max_tokens, penalties, seed) and,
in `extra_body`, everything else under the backend's name. A sampler the backend does not read is
not sent. docs/sillytavern.md has the table.
"""

from __future__ import annotations

import json
import re
from typing import Any

KOBOLDCPP, LLAMACPP, TEXTGEN, VLLM = "koboldcpp", "llamacpp", "textgen", "vllm"
BACKENDS = (KOBOLDCPP, LLAMACPP, TEXTGEN, VLLM)

# The preset's name (SillyTavern's, with KoboldAI's older spellings) -> ours.
ALIASES = {
    "typical": "typical_p",
    "mirostat": "mirostat_mode",
    "repetition_penalty_range": "rep_pen_range",
    "rep_pen": "repetition_penalty",
    "temp": "temperature",
    "freq_pen": "frequency_penalty",
    "presence_pen": "presence_penalty",
    "genamt": "max_tokens",
    # NovelAI's spellings, for a NovelAI preset used with a local server.
    "repetition_penalty_slope": "rep_pen_slope",
    "tail_free_sampling": "tfs",
    "mirostat_lr": "mirostat_eta",
    "ignore_eos_token": "ban_eos_token",
}

# Ours -> the name each backend reads (absent: the backend has no such sampler).
WIRE: dict[str, dict[str, str]] = {
    "top_k": {KOBOLDCPP: "top_k", LLAMACPP: "top_k", TEXTGEN: "top_k", VLLM: "top_k"},
    "min_p": {KOBOLDCPP: "min_p", LLAMACPP: "min_p", TEXTGEN: "min_p", VLLM: "min_p"},
    "repetition_penalty": {
        KOBOLDCPP: "rep_pen",
        LLAMACPP: "repeat_penalty",
        TEXTGEN: "repetition_penalty",
        VLLM: "repetition_penalty",
    },
    "rep_pen_range": {
        KOBOLDCPP: "rep_pen_range",
        LLAMACPP: "repeat_last_n",
        TEXTGEN: "repetition_penalty_range",
    },
    "rep_pen_slope": {KOBOLDCPP: "rep_pen_slope"},
    "typical_p": {KOBOLDCPP: "typical", LLAMACPP: "typical_p", TEXTGEN: "typical_p"},
    "tfs": {KOBOLDCPP: "tfs", LLAMACPP: "tfs_z", TEXTGEN: "tfs"},
    "top_a": {KOBOLDCPP: "top_a", TEXTGEN: "top_a"},
    "smoothing_factor": {KOBOLDCPP: "smoothing_factor", TEXTGEN: "smoothing_factor"},
    "smoothing_curve": {TEXTGEN: "smoothing_curve"},
    "mirostat_mode": {KOBOLDCPP: "mirostat", LLAMACPP: "mirostat", TEXTGEN: "mirostat_mode"},
    "mirostat_tau": {KOBOLDCPP: "mirostat_tau", LLAMACPP: "mirostat_tau", TEXTGEN: "mirostat_tau"},
    "mirostat_eta": {KOBOLDCPP: "mirostat_eta", LLAMACPP: "mirostat_eta", TEXTGEN: "mirostat_eta"},
    "dry_multiplier": {KOBOLDCPP: "dry_multiplier", LLAMACPP: "dry_multiplier", TEXTGEN: "dry_multiplier"},
    "dry_base": {KOBOLDCPP: "dry_base", LLAMACPP: "dry_base", TEXTGEN: "dry_base"},
    "dry_allowed_length": {
        KOBOLDCPP: "dry_allowed_length",
        LLAMACPP: "dry_allowed_length",
        TEXTGEN: "dry_allowed_length",
    },
    "dry_penalty_last_n": {
        KOBOLDCPP: "dry_penalty_last_n",
        LLAMACPP: "dry_penalty_last_n",
        TEXTGEN: "dry_penalty_last_n",
    },
    "dry_sequence_breakers": {
        KOBOLDCPP: "dry_sequence_breakers",
        LLAMACPP: "dry_sequence_breakers",
        TEXTGEN: "dry_sequence_breakers",
    },
    "xtc_threshold": {KOBOLDCPP: "xtc_threshold", LLAMACPP: "xtc_threshold", TEXTGEN: "xtc_threshold"},
    "xtc_probability": {
        KOBOLDCPP: "xtc_probability",
        LLAMACPP: "xtc_probability",
        TEXTGEN: "xtc_probability",
    },
}

# Lists and switches, sent as they are.
AS_IS: dict[str, dict[str, str]] = {
    "sampler_order": {KOBOLDCPP: "sampler_order"},
    "samplers": {LLAMACPP: "samplers"},
    "sampler_priority": {TEXTGEN: "sampler_priority"},
    "ban_eos_token": {LLAMACPP: "ignore_eos", TEXTGEN: "ban_eos_token", VLLM: "ignore_eos"},
    "temperature_last": {TEXTGEN: "temperature_last"},
    "min_length": {TEXTGEN: "min_length", VLLM: "min_tokens"},
}

# Sent as the OpenAI completions fields every backend reads.
TOP_LEVEL = ("temperature", "top_p", "max_tokens", "frequency_penalty", "presence_penalty", "seed")


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return int(number) if number.is_integer() else number
    return None


def sequence_breakers(value: Any) -> list[str]:
    """Read DRY sequence breakers: a list, or SillyTavern's JSON text of one."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str) and value.strip():
        try:
            parsed = json.loads(value)
        except ValueError:
            return [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(parsed, list):
            return [str(v) for v in parsed]
    return []


_IDS = re.compile(r"^\s*\[[\d\s,]*\]\s*$")


def _token_ids(text: str) -> list[int] | None:
    """`[123, 456]` (SillyTavern's way of naming token ids) -> the ids; anything else -> None."""
    if _IDS.match(text):
        return [int(part) for part in re.findall(r"\d+", text)]
    return None


def bans(value: Any) -> tuple[list[str], list[int]]:
    """Split SillyTavern's `banned_tokens` (one per line): "quoted" lines are strings, [ids] token
    ids; a bare line is text, banned as a string too (the backend has the tokenizer)."""
    strings: list[str] = []
    ids: list[int] = []
    lines = value if isinstance(value, list) else str(value or "").split("\n")
    for line in (str(x) for x in lines):
        if not line.strip():
            continue
        found = _token_ids(line)
        if found is not None:
            ids.extend(found)
        elif len(line) >= 2 and line.startswith('"') and line.endswith('"'):
            strings.append(line[1:-1])
        else:
            strings.append(line)
    return list(dict.fromkeys(strings)), list(dict.fromkeys(ids))


def _biases(value: Any) -> tuple[dict[str, float], list[tuple[str, float]]]:
    """Return (token id -> bias, text -> bias) from SillyTavern's logit bias list or a plain mapping."""
    by_id: dict[str, float] = {}
    by_text: list[tuple[str, float]] = []
    if isinstance(value, dict):
        for key, bias in value.items():
            number = _number(bias)
            if number is not None and str(key).strip().isdigit():
                by_id[str(key).strip()] = number
        return by_id, by_text
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        number = _number(item.get("value"))
        text = str(item.get("text") or "")
        if number is None or not text:
            continue
        ids = _token_ids(text)
        if ids is not None:
            by_id.update((str(i), number) for i in ids)
        else:
            by_text.append((text, number))
    return by_id, by_text


def normalise(samplers: dict) -> dict:
    """Return the samplers under our names (SillyTavern's older spellings understood)."""
    out: dict = {}
    for key, value in samplers.items():
        name = ALIASES.get(key, key)
        if name not in out or key == name:
            out[name] = value
    return out


def _dynamic_temperature(values: dict, backend: str, params: dict, body: dict) -> None:
    """SillyTavern's dynamic temperature: the middle of min/max, the spread as the backend names it."""
    low, high = _number(values.get("min_temp")), _number(values.get("max_temp"))
    if not values.get("dynatemp") or low is None or high is None or backend == VLLM:
        return
    params["temperature"] = (low + high) / 2
    exponent = _number(values.get("dynatemp_exponent"))
    if backend == TEXTGEN:
        body.update(dynamic_temperature=True, dynatemp_low=low, dynatemp_high=high)
    else:
        body["dynatemp_range"] = (high - low) / 2
    if exponent is not None:
        body["dynatemp_exponent"] = exponent


def text_params(samplers: dict, backend: str) -> dict:
    """Return the completion call's keyword arguments for `backend` from a preset's samplers.

    `samplers` holds the preset's fields and its kept SillyTavern settings, merged (pure).
    """
    backend = backend if backend in BACKENDS else VLLM
    values = normalise(samplers)
    params: dict = {}
    for name in TOP_LEVEL:
        number = _number(values.get(name))
        if number is not None and not (name == "seed" and number < 0):
            params[name] = number
    body: dict = {}
    _dynamic_temperature(values, backend, params, body)
    for name, names in AS_IS.items():
        if name in values and backend in names and isinstance(values[name], list | bool | int | float):
            body[names[backend]] = values[name]
    for name, names in WIRE.items():
        if name not in values or backend not in names:
            continue
        if name == "dry_sequence_breakers":
            breakers = sequence_breakers(values[name])
            body[names[backend]] = (
                ", ".join(json.dumps(b) for b in breakers) if backend == TEXTGEN else breakers
            )
            continue
        number = _number(values[name])
        if number is not None:
            body[names[backend]] = number
    strings, ids = bans(values.get("banned_tokens") or values.get("banned_strings") or "")
    if isinstance(values.get("banned_strings"), list) and values.get("banned_tokens"):
        strings = list(dict.fromkeys(strings + [str(s) for s in values["banned_strings"]]))
    by_id, by_text = _biases(values.get("logit_bias"))
    if backend == LLAMACPP:
        pairs: list = [[int(k), v] for k, v in by_id.items()] + [[t, v] for t, v in by_text]
        pairs += [[i, False] for i in ids] + [[s, False] for s in strings]
        if pairs:
            body["logit_bias"] = pairs
    else:
        if backend in (KOBOLDCPP, VLLM):
            by_id.update((str(i), -100) for i in ids)
        if by_id:
            body["logit_bias"] = by_id
        if strings:
            body[{KOBOLDCPP: "banned_tokens", TEXTGEN: "banned_strings", VLLM: "bad_words"}[backend]] = (
                strings
            )
        if ids and backend == TEXTGEN:
            body["custom_token_bans"] = ",".join(str(i) for i in ids)
    if body:
        params["extra_body"] = body
    return params
