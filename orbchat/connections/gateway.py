"""The LLM gateway: every call to a Chat, Utility, embedding or rerank model goes through here.

Three rules hold for every call, whoever asked for it:
- the key is the connection's own, or the literal "no-key": litellm never falls back to the
  server's environment (an operator's OPENAI_API_KEY must not pay for, or leak to, a user's call);
- a connection's extra parameters are sampler and request fields only (`providers.EXTRA_PARAMS`): the
  address, key and headers of a call are not free-form;
- a user-chosen API base passes the outbound policy (`outbound`) at the moment of the call.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import lru_cache

from orbchat import env
from orbchat.connections import outbound, providers, secrets
from orbchat.connections.models import Connection

env.apply_offline_defaults()

# Sent as "the key" when a connection has none: local servers take no key, and the OpenAI
# client refuses to send none (it would read OPENAI_API_KEY from the environment instead).
NO_KEY = "no-key"

# The tokenizer used when litellm knows none for the model.
DEFAULT_TOKENIZER = "gpt-4o"


class ProviderRefused(Exception):
    """The server will not make this call; the message says why in plain words."""


@dataclass(frozen=True)
class Target:
    """What litellm needs to reach one model, with the key decrypted only in memory.

    `guarded`: the owner's calls must pass the outbound-address check (`outbound.guarded`).
    `refusal`: why the server will make no call to this target at all ("" when it will).
    """

    model: str
    api_base: str | None
    api_key: str
    extra: dict
    guarded: bool = False
    refusal: str = ""


def target_for(connection: Connection, *, owner=None) -> Target:
    """Return how to reach the connection's model; `owner`, when the caller has read it, is not read again."""
    owner = owner if owner is not None and owner.pk == connection.owner_id else connection.owner
    key = secrets.decrypt(connection.api_key_encrypted) or NO_KEY
    refusal = ""
    if key == NO_KEY and providers.needs_key(connection.provider) and not connection.api_base:
        refusal = "This connection has no API key; add one in Connections."
    elif providers.uses_server_credentials(connection.model) and not owner.can_manage_users:
        refusal = providers.SERVER_CREDENTIALS_REFUSED
    return Target(
        model=connection.model,
        api_base=connection.api_base or None,
        api_key=key,
        extra={k: v for k, v in (connection.extra_params or {}).items() if k in providers.EXTRA_PARAMS},
        guarded=bool(connection.api_base) and outbound.guarded(owner),
        refusal=refusal,
    )


def _refuse_early(target: Target) -> None:
    if target.refusal:
        raise ProviderRefused(target.refusal)


def _request(target: Target, params: dict) -> dict:
    """Return the keyword arguments of one litellm call: the target's, then the call's own."""
    return {
        "model": target.model,
        "api_base": target.api_base,
        "api_key": target.api_key,
        **target.extra,
        **params,
    }


def check(target: Target) -> None:
    """Raise ProviderRefused/OutboundRefused unless the server may make this call (blocking)."""
    _refuse_early(target)
    if target.guarded and target.api_base:
        outbound.check(target.api_base)


async def acheck(target: Target) -> None:
    _refuse_early(target)
    if target.guarded and target.api_base:
        await outbound.acheck(target.api_base)


_TRACEBACK = re.compile(r"Traceback \(most recent call last\):.*", re.DOTALL)
_FRAME = re.compile(r'^\s*File ".*$', re.MULTILINE)
_LITELLM_PREFIX = re.compile(r"\blitellm\.\w+:\s*(\w+Error:\s*)?")
_KEYLIKE = re.compile(
    r"(Bearer\s+\S+)|(\b(?:sk|pk|rk|gsk|xai|sess)-[\w*.\-]{4,})|(\bAIza[\w\-]{10,})|(\b[\w\-]{40,}\b)"
)
MAX_ERROR_CHARS = 300


def mask(text: str) -> str:
    """Hide anything that looks like a key or a token, and drop Python tracebacks (pure)."""
    text = _TRACEBACK.sub("", text)
    text = _FRAME.sub("", text)
    text = _LITELLM_PREFIX.sub("", text)
    text = _KEYLIKE.sub("[hidden]", text)
    text = " ".join(text.split())
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def plain_error(exc: BaseException) -> str:
    """Say what went wrong with a provider call in words a person can act on, keys masked."""
    import litellm

    if isinstance(exc, secrets.KeyUnreadable | ProviderRefused | outbound.OutboundRefused):
        return str(exc)
    detail = mask(str(getattr(exc, "message", "") or exc).strip())
    status = getattr(exc, "status_code", None)
    # litellm reports a refused or dropped connection as APIConnectionError or as a 500
    # whose text says "Connection error"; either way the server was not reached.
    if isinstance(exc, litellm.APIConnectionError) or "Connection error" in detail:
        return f"Could not reach the provider: {detail}"
    if isinstance(exc, litellm.AuthenticationError):
        return f"The provider refused the API key (401). {detail}"
    if isinstance(exc, litellm.RateLimitError):
        return f"The provider is rate limiting requests (429); wait and retry. {detail}"
    if isinstance(exc, litellm.NotFoundError):
        return f"The provider does not know this model (404). {detail}"
    if isinstance(exc, litellm.ContextWindowExceededError):
        return f"The prompt is longer than the model's context window. {detail}"
    if isinstance(exc, litellm.Timeout):
        return f"The provider did not answer in time. {detail}"
    if isinstance(exc, litellm.BadRequestError):
        return f"The provider rejected the request (400). {detail}"
    if status:
        return f"The provider answered with an error ({status}). {detail}"
    return f"The call failed: {detail}"


def complete(target: Target, messages: list[dict], *, timeout: float = 60, **params) -> str:
    """Return the text of one non-streamed completion."""
    import litellm

    check(target)
    response = litellm.completion(
        **_request(target, {"messages": messages, "timeout": timeout, "num_retries": 0, **params})
    )
    return response.choices[0].message.content or ""


async def acomplete(target: Target, messages: list[dict], *, timeout: float = 60, **params) -> str:
    """Return the text of one non-streamed completion, from the event loop."""
    import litellm

    await acheck(target)
    response = await litellm.acompletion(
        **_request(target, {"messages": messages, "timeout": timeout, "num_retries": 0, **params})
    )
    return response.choices[0].message.content or ""


async def astream(
    target: Target, messages: list[dict], *, timeout: float = 60, stable: int = 0, **params
) -> AsyncIterator:
    """Open a streamed completion; return the stream of chunks (with usage at the end).

    `stable`: how many leading messages stay the same from turn to turn; a provider that takes
    cache hints gets that prefix marked (`providers.cache_hinted`)."""
    import litellm

    await acheck(target)
    return await litellm.acompletion(
        **_request(
            target,
            {
                "messages": providers.cache_hinted(target.model, messages, stable),
                "stream": True,
                "stream_options": {"include_usage": True},
                "timeout": timeout,
                "num_retries": 0,
                **params,
            },
        )
    )


def embed(target: Target, texts: list[str], *, timeout: float = 60) -> list[list[float]]:
    """Return one vector per text from a remote embedding model."""
    import litellm

    check(target)
    response = litellm.embedding(**_request(target, {"input": texts, "timeout": timeout}))
    return [item["embedding"] for item in response.data]


def rerank(target: Target, query: str, documents: list[str]) -> list[float]:
    """Return one relevance score per document from a remote rerank model."""
    import litellm

    check(target)
    response = litellm.rerank(
        **_request(target, {"query": query, "documents": documents, "return_documents": False})
    )
    scores = [0.0] * len(documents)
    for item in response.results:
        scores[item["index"]] = float(item["relevance_score"])
    return scores


def test_connection(connection: Connection, *, purpose: str = "chat") -> tuple[bool, str]:
    """Send a tiny request fit for the connection's role (chat, embedding or rerank).

    Return (worked, the provider's answer or the error in plain words).
    """
    try:
        target = target_for(connection)
        if purpose == "embedding":
            vectors = embed(target, ["ready"], timeout=20)
            return True, f"The model returned a vector of {len(vectors[0])} numbers."
        if purpose == "rerank":
            documents = ["A bird sings.", "The red dragon sleeps."]
            scores = rerank(target, "Where is the red dragon?", documents)
            best = max(range(len(documents)), key=scores.__getitem__)
            return True, f"The reranker put first: {documents[best]}"
        text = complete(
            target,
            [{"role": "user", "content": "Reply with the single word: ready"}],
            max_tokens=5,
            timeout=20,
        )
    except Exception as exc:  # noqa: BLE001 - every provider failure is reported, not raised
        return False, plain_error(exc)
    return True, f"The model answered: {text.strip()[:200] or '(an empty reply)'}"


def context_size(connection: Connection) -> int | None:
    """Return the context size: the connection's own, else what litellm knows of the model."""
    if connection.context_size:
        return connection.context_size
    import litellm

    try:
        info = litellm.get_model_info(connection.model)
    except Exception:  # noqa: BLE001 - unknown models simply have no known size
        return None
    return info.get("max_input_tokens") or info.get("max_tokens")


@lru_cache(maxsize=64)
def token_counter(model: str) -> Callable[[str], int]:
    """Return a counter of `model`'s tokens, with litellm's offline tokenizers."""
    import litellm

    model = model or DEFAULT_TOKENIZER

    # Prompt sections repeat turn after turn; their counts are remembered.
    @lru_cache(maxsize=4096)
    def count(text: str) -> int:
        return litellm.token_counter(model=model, text=text) if text else 0

    return count


def count_tokens(text: str, model: str = DEFAULT_TOKENIZER) -> int:
    """Return the tokens of `text` for `model` (an OpenAI tokenizer when litellm knows no better)."""
    return token_counter(model)(text)
