"""What OrbChat knows of each provider, and what a connection's extra parameters may set (pure)."""

from __future__ import annotations

# Provider -> (litellm prefix, default API base, does it need a key)
PROVIDERS: dict[str, tuple[str, str, bool]] = {
    "openai": ("openai/", "", True),
    "anthropic": ("anthropic/", "", True),
    "openrouter": ("openrouter/", "", True),
    "gemini": ("gemini/", "", True),
    "ollama": ("ollama/", "http://127.0.0.1:11434", False),
    "local": ("openai/", "http://127.0.0.1:5001/v1", False),
    "other": ("", "", False),
}


def takes_cache_hints(model: str) -> bool:
    """Whether the provider caches a prompt's prefix only where the request marks it (Anthropic)."""
    return model.strip().startswith("anthropic/")


def cache_hinted(model: str, messages: list[dict], stable: int) -> list[dict]:
    """Mark the end of the first `stable` messages as a cacheable prefix, for providers that take
    the hint (litellm passes Anthropic's `cache_control` through); others get the messages as they are."""
    if stable <= 0 or stable > len(messages) or not takes_cache_hints(model):
        return messages
    marked = list(messages)
    last = dict(marked[stable - 1])
    last["content"] = [{"type": "text", "text": last["content"], "cache_control": {"type": "ephemeral"}}]
    marked[stable - 1] = last
    return marked


def litellm_model(provider: str, model: str) -> str:
    """Prefix a bare model name with the provider's litellm route (`gpt-4o` -> `openai/gpt-4o`)."""
    model = model.strip()
    prefix = PROVIDERS.get(provider, ("", "", False))[0]
    if prefix and not model.startswith(prefix):
        return prefix + model
    return model


# What a connection's "Extra parameters" may set: samplers and request options the providers
# document. Everything that says where a call goes or who pays (api_base, base_url, api_key,
# headers, extra_body, …) is refused.
EXTRA_PARAMS = frozenset(
    """
    temperature top_p top_k min_p top_a typical_p tfs repetition_penalty repetition_penalty_range
    frequency_penalty presence_penalty max_tokens max_completion_tokens stop seed logit_bias
    logprobs top_logprobs response_format reasoning_effort thinking mirostat mirostat_tau
    mirostat_eta num_ctx num_predict keep_alive dynatemp_range dynatemp_exponent smoothing_factor
    dry_multiplier dry_base dry_allowed_length dry_sequence_breakers xtc_threshold xtc_probability
    parallel_tool_calls user
    rep_pen rep_pen_range rep_pen_slope repeat_penalty repeat_last_n typical tfs_z mirostat_mode
    smoothing_curve dry_penalty_last_n banned_tokens banned_strings bad_words custom_token_bans
    sampler_order samplers sampler_priority ban_eos_token ignore_eos temperature_last min_length
    min_tokens dynamic_temperature dynatemp_low dynatemp_high
    """.split()
)


def extra_refused(extra: dict) -> list[str]:
    """Return the names in `extra` that a connection may not set (pure)."""
    return sorted(name for name in extra if name not in EXTRA_PARAMS)


def needs_key(provider: str) -> bool:
    return PROVIDERS.get(provider, ("", "", False))[2]


# litellm routes that sign their calls with credentials read from the server's environment (cloud
# service accounts, AWS profiles), not with the connection's key: only administrators may use them.
ENV_CREDENTIAL_ROUTES = frozenset(
    "bedrock bedrock_converse sagemaker sagemaker_chat vertex_ai vertex_ai_beta watsonx watsonx_text "
    "snowflake oci".split()
)


SERVER_CREDENTIALS_REFUSED = (
    "This model signs in with the server's own cloud credentials; only an administrator can use it."
)


def uses_server_credentials(model: str) -> bool:
    """True when the litellm model string routes to a provider signed by the environment (pure)."""
    return model.split("/", 1)[0].strip().lower() in ENV_CREDENTIAL_ROUTES if "/" in model else False
