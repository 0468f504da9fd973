"""The LLM gateway: every call to a Chat or Utility model goes through litellm here."""

from __future__ import annotations

from dataclasses import dataclass

from orbchat import env
from orbchat.connections import secrets
from orbchat.connections.models import Connection

env.apply_offline_defaults()


@dataclass(frozen=True)
class Target:
    """What litellm needs to reach one model, with the key decrypted only in memory."""

    model: str
    api_base: str | None
    api_key: str | None
    extra: dict


def target_for(connection: Connection) -> Target:
    key = secrets.decrypt(connection.api_key_encrypted)
    if not key and connection.api_base:
        # Local OpenAI-compatible servers take no key, but the OpenAI client refuses to send none.
        key = "no-key"
    return Target(
        model=connection.model,
        api_base=connection.api_base or None,
        api_key=key or None,
        extra=dict(connection.extra_params or {}),
    )


def plain_error(exc: BaseException) -> str:
    """Say what went wrong with a provider call in words a person can act on."""
    import litellm

    detail = str(getattr(exc, "message", "") or exc).strip()
    status = getattr(exc, "status_code", None)
    if isinstance(exc, secrets.KeyUnreadable):
        return str(exc)
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

    response = litellm.completion(
        model=target.model,
        messages=messages,
        api_base=target.api_base,
        api_key=target.api_key,
        timeout=timeout,
        num_retries=0,
        **{**target.extra, **params},
    )
    return response.choices[0].message.content or ""


def embed(target: Target, texts: list[str], *, timeout: float = 60) -> list[list[float]]:
    """Return one vector per text from a remote embedding model."""
    import litellm

    response = litellm.embedding(
        model=target.model,
        input=texts,
        api_base=target.api_base,
        api_key=target.api_key,
        timeout=timeout,
        **target.extra,
    )
    return [item["embedding"] for item in response.data]


def test_connection(connection: Connection, *, purpose: str = "chat") -> tuple[bool, str]:
    """Send a tiny request fit for the connection's role (chat, embedding or rerank).

    Return (worked, the provider's answer or the error in plain words).
    """
    from orbchat.connections import reranker

    target = target_for(connection) if purpose != "rerank" else None
    try:
        if purpose == "embedding":
            vectors = embed(target, ["ready"], timeout=20)
            return True, f"The model returned a vector of {len(vectors[0])} numbers."
        if purpose == "rerank":
            documents = ["A bird sings.", "The red dragon sleeps."]
            scores = reranker.remote_scores(target_for(connection), "Where is the red dragon?", documents)
            best = max(range(len(documents)), key=scores.__getitem__)
            return True, f"The reranker put first: {documents[best]}"
        text = complete(
            target,
            [{"role": "user", "content": "Reply with the single word: ready"}],
            max_tokens=5,
            timeout=20,
        )
    except reranker.RerankFailed as exc:
        return False, str(exc)
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
