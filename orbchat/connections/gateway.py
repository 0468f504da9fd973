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
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from orbchat import env
from orbchat.connections import outbound, providers, secrets
from orbchat.connections.models import Connection
from orbchat.prompting import instruct

env.apply_offline_defaults()

# Sent as "the key" when a connection has none: local servers take no key, and the OpenAI
# client refuses to send none (it would read OPENAI_API_KEY from the environment instead).
NO_KEY = "no-key"

# litellm's route for an OpenAI-compatible /v1/completions endpoint.
TEXT_ROUTE = "text-completion-openai/"

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
    # A text-completion target takes one prompt text (`atext_stream`); "" is a chat model.
    text_backend: str = ""


def target_for(connection: Connection, *, owner=None) -> Target:
    """Return how to reach the connection's model; `owner`, when the caller has read it, is not read again."""
    owner = owner if owner is not None and owner.pk == connection.owner_id else connection.owner
    key = secrets.decrypt(connection.api_key_encrypted) or NO_KEY
    refusal = ""
    if key == NO_KEY and providers.needs_key(connection.provider) and not connection.api_base:
        refusal = "This connection has no API key; add one in Connections."
    elif providers.uses_server_credentials(connection.model) and not owner.can_manage_users:
        refusal = providers.SERVER_CREDENTIALS_REFUSED
    text_backend = connection.text_backend if connection.is_text_completion else ""
    model = connection.model
    if text_backend:
        # litellm's route to an OpenAI-compatible /v1/completions endpoint.
        model = TEXT_ROUTE + model.removeprefix(TEXT_ROUTE).removeprefix("openai/")
    return Target(
        model=model,
        api_base=connection.api_base or None,
        api_key=key,
        extra={k: v for k, v in (connection.extra_params or {}).items() if k in providers.EXTRA_PARAMS},
        guarded=bool(connection.api_base) and outbound.guarded(owner),
        refusal=refusal,
        text_backend=text_backend,
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


# What OpenAI's /v1/completions takes as its own fields; a text target's other extra parameters
# go in the request body as the backend names them.
TEXT_FIELDS = frozenset(
    "temperature top_p max_tokens frequency_penalty presence_penalty stop seed logprobs user".split()
)


def _text_request(target: Target, params: dict) -> dict:
    """Return the keyword arguments of one litellm text completion: OpenAI's fields at the top,
    the samplers only a local server reads in `extra_body` (the call's own over the target's)."""
    body = {k: v for k, v in target.extra.items() if k not in TEXT_FIELDS}
    body.update(params.pop("extra_body", None) or {})
    if "stop" in params:
        # In the body as it is: litellm keeps only OpenAI's first four stop strings, and local
        # servers take any number (a template's sequences and the names make more).
        body["stop"] = params.pop("stop")
    body = {k: v for k, v in body.items() if k in providers.EXTRA_PARAMS}
    request = {
        "model": target.model,
        "api_base": target.api_base,
        "api_key": target.api_key,
        **{k: v for k, v in target.extra.items() if k in TEXT_FIELDS},
        **params,
    }
    if body:
        request["extra_body"] = body
    return request


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


@dataclass(frozen=True)
class Failure:
    """A failed provider call in plain words: what happened and what to do; `retry` is whether
    trying the same call again can help."""

    text: str
    retry: bool


SETTINGS = "Settings → Models"
UNREACHABLE = Failure(
    f"Could not reach the provider. Check that the server is running and that its address in {SETTINGS} "
    "is right, then retry.",
    True,
)
BAD_KEY = Failure(f"The provider refused the API key. Check the key in {SETTINGS}.", False)
NO_ACCESS = Failure(
    f"The provider says this key may not use this model. Check the key and the model in {SETTINGS}.", False
)
RATE_LIMITED = Failure(
    "The provider is limiting how often it can be called. Wait a moment, then retry.", True
)
UNKNOWN_MODEL = Failure(f"The provider does not know this model. Check the model name in {SETTINGS}.", False)
TOO_LONG = Failure(
    "The prompt is longer than the model can read. Lower the context size in the preset or the connection.",
    False,
)
TIMED_OUT = Failure("The provider did not answer in time. Retry, or try again later.", True)
CONTENT_REFUSED = Failure(
    "The provider refused to answer this prompt under its content rules. Edit the message or use another "
    "model.",
    False,
)
REJECTED = Failure(
    f"The provider rejected the request. Check the model and the extra parameters in {SETTINGS}.", False
)
PROVIDER_DOWN = Failure("The provider had a problem on its side. Retry in a moment.", True)
FAILED = Failure(
    f"The call to the provider failed. Retry; if it keeps failing, test the connection in {SETTINGS}.", True
)


def explain(exc: BaseException) -> Failure:
    """Say what went wrong with a provider call and whether retrying can help; never the raw error."""
    import litellm

    if isinstance(exc, secrets.KeyUnreadable | ProviderRefused | outbound.OutboundRefused):
        return Failure(str(exc), False)
    detail = str(getattr(exc, "message", "") or exc)
    status = getattr(exc, "status_code", None)
    # Checked most specific first: litellm's errors subclass one another (a context-window error
    # is a bad request, a timeout may carry a 408).
    checks = (
        (litellm.ContextWindowExceededError, TOO_LONG),
        (litellm.ContentPolicyViolationError, CONTENT_REFUSED),
        (litellm.AuthenticationError, BAD_KEY),
        (litellm.PermissionDeniedError, NO_ACCESS),
        (litellm.NotFoundError, UNKNOWN_MODEL),
        (litellm.RateLimitError, RATE_LIMITED),
        (litellm.Timeout, TIMED_OUT),
    )
    for kind, failure in checks:
        if isinstance(exc, kind):
            return failure
    # litellm reports a refused or dropped connection as APIConnectionError or as a 500
    # whose text says "Connection error"; either way the server was not reached.
    if isinstance(exc, litellm.APIConnectionError) or "Connection error" in detail:
        return UNREACHABLE
    by_status = {401: BAD_KEY, 403: NO_ACCESS, 404: UNKNOWN_MODEL, 408: TIMED_OUT, 429: RATE_LIMITED}
    if status in by_status:
        return by_status[status]
    if isinstance(exc, litellm.BadRequestError) or status in (400, 422):
        return REJECTED
    if isinstance(status, int) and status >= 500:
        return PROVIDER_DOWN
    return FAILED


def plain_error(exc: BaseException) -> str:
    """Say what went wrong with a provider call in words a person can act on."""
    return explain(exc).text


def _text_call(messages: list[dict], template: instruct.Instruct | None, params: dict) -> dict:
    """Return a text target's call parameters for chat messages: the prompt written with the
    connection's instruct template (`instruct.render_messages`), and its stop strings before the
    call's own."""
    written = instruct.render_messages(template, messages)
    stop = list(dict.fromkeys([*written.stop, *(params.pop("stop", None) or ())]))
    if stop:
        params["stop"] = stop
    return {"prompt": written.text, **params}


def complete(
    target: Target,
    messages: list[dict],
    *,
    template: instruct.Instruct | None = None,
    timeout: float = 60,
    **params,
) -> str:
    """Return the text of one non-streamed completion.

    A text target gets the messages written with `template`, the connection's instruct template
    (None: one line each)."""
    import litellm

    check(target)
    if target.text_backend:
        call = _text_call(messages, template, {"timeout": timeout, "num_retries": 0, **params})
        response = litellm.text_completion(**_text_request(target, call))
        return response.choices[0].text or ""
    response = litellm.completion(
        **_request(target, {"messages": messages, "timeout": timeout, "num_retries": 0, **params})
    )
    return response.choices[0].message.content or ""


def complete_with_tools(
    target: Target,
    messages: list[dict],
    *,
    tools: list[dict] | None,
    template: instruct.Instruct | None = None,
    timeout: float = 60,
    **params,
) -> tuple[str, list[dict]]:
    """Return the text and the tool calls of one non-streamed completion offered `tools`.

    Each tool call comes back as OpenAI writes it ({"id", "type", "function": {"name",
    "arguments"}}, the arguments a JSON string). A text target cannot be offered tools: it gets
    the messages written with `template`, and answers with text only."""
    import litellm

    if target.text_backend or not tools:
        return complete(target, messages, template=template, timeout=timeout, **params), []
    check(target)
    response = litellm.completion(
        **_request(
            target, {"messages": messages, "tools": tools, "timeout": timeout, "num_retries": 0, **params}
        )
    )
    message = response.choices[0].message
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.function.name, "arguments": call.function.arguments},
        }
        for call in message.tool_calls or ()
    ]
    return message.content or "", calls


def stream(
    target: Target,
    messages: list[dict],
    *,
    template: instruct.Instruct | None = None,
    timeout: float = 60,
    **params,
) -> Iterator[str]:
    """Yield the text of one streamed completion as it arrives, piece by piece, never an empty one
    (a text target as in `complete`)."""
    import litellm

    check(target)
    if target.text_backend:
        call = _text_call(
            messages, template, {"timeout": timeout, "num_retries": 0, "stream": True, **params}
        )
        for chunk in litellm.text_completion(**_text_request(target, call)):
            if chunk.choices and chunk.choices[0].text:
                yield chunk.choices[0].text
        return
    for chunk in litellm.completion(
        **_request(
            target, {"messages": messages, "stream": True, "timeout": timeout, "num_retries": 0, **params}
        )
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            yield chunk.choices[0].delta.content


def stream_with_tools(
    target: Target,
    messages: list[dict],
    *,
    tools: list[dict] | None,
    on_text: Callable[[str], None],
    template: instruct.Instruct | None = None,
    timeout: float = 60,
    **params,
) -> tuple[str, list[dict]]:
    """`complete_with_tools`, streamed: hand each piece of the answer to `on_text` as it arrives
    (its text, and its tool calls' arguments as they are written); return the same text and tool
    calls as the unstreamed call."""
    import litellm

    if target.text_backend or not tools:
        pieces = []
        for piece in stream(target, messages, template=template, timeout=timeout, **params):
            pieces.append(piece)
            on_text(piece)
        return "".join(pieces), []
    check(target)
    text: list[str] = []
    calls: dict[int, dict] = {}  # by the index the stream gives each call
    request = {"messages": messages, "tools": tools, "stream": True, "timeout": timeout, "num_retries": 0}
    for chunk in litellm.completion(**_request(target, {**request, **params})):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            text.append(delta.content)
            on_text(delta.content)
        for part in getattr(delta, "tool_calls", None) or ():
            call = calls.setdefault(
                part.index or 0, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
            )
            call["id"] = part.id or call["id"]
            function = part.function
            if function is not None:
                call["function"]["name"] = call["function"]["name"] or function.name or ""
                if function.arguments:
                    call["function"]["arguments"] += function.arguments
                    on_text(function.arguments)
    return "".join(text), [calls[index] for index in sorted(calls)]


async def acomplete(
    target: Target,
    messages: list[dict],
    *,
    template: instruct.Instruct | None = None,
    timeout: float = 60,
    **params,
) -> str:
    """Return the text of one non-streamed completion, from the event loop (a text target as in
    `complete`)."""
    import litellm

    await acheck(target)
    if target.text_backend:
        call = _text_call(messages, template, {"timeout": timeout, "num_retries": 0, **params})
        response = await litellm.atext_completion(**_text_request(target, call))
        return response.choices[0].text or ""
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


async def atext_complete(target: Target, prompt: str, *, timeout: float = 60, **params) -> str:
    """Return the text of one non-streamed text completion, from the event loop."""
    import litellm

    await acheck(target)
    response = await litellm.atext_completion(
        **_text_request(target, {"prompt": prompt, "timeout": timeout, "num_retries": 0, **params})
    )
    return response.choices[0].text or ""


async def atext_stream(target: Target, prompt: str, *, timeout: float = 60, **params) -> AsyncIterator:
    """Open a streamed text completion; return the stream of chunks (`choices[0].text`, usage at the end)."""
    import litellm

    await acheck(target)
    return await litellm.atext_completion(
        **_text_request(
            target,
            {
                "prompt": prompt,
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


def test_connection(
    connection: Connection, *, purpose: str = "chat", template: instruct.Instruct | None = None
) -> tuple[bool, str]:
    """Send a tiny request fit for the connection's role (chat, embedding or rerank); a
    text-completion connection's is written with `template`, its instruct template.

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
            template=template,
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
