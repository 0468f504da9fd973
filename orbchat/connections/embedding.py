"""The Text-embedding role: which model embeds a user's texts, and embedding with it.

A user's embedding model is named by a *model key*: the built-in all-MiniLM-L6-v2
(`BUILTIN_KEY`, the default) or "<connection id>:<model>" for a connection reached through the
gateway. An index built with one key keeps embedding with that key's model until it retires.
"""

from __future__ import annotations

from orbchat.accounts.models import User
from orbchat.connections import embedder, gateway
from orbchat.connections.models import Connection
from orbchat.connections.selectors import model_roles_get

BATCH = 64
BUILTIN_KEY = "builtin:all-MiniLM-L6-v2"


class EmbedderFailed(Exception):
    """The Text-embedding model could not embed (the message says why, in plain words)."""


def model_key(user: User) -> str:
    """The key of the user's current Text-embedding model."""
    connection = model_roles_get(user=user).embedding
    if connection is None:
        return BUILTIN_KEY
    return f"{connection.pk}:{connection.model}"


def embed(user: User, texts: list[str]) -> list[list[float]]:
    """Embed texts with the user's Text-embedding role (the built-in MiniLM by default), in batches."""
    return _embed(model_roles_get(user=user).embedding, texts)


def embed_with(key: str, texts: list[str]) -> list[list[float]]:
    """Embed texts with the model a key names; raise EmbedderFailed when it is gone or fails."""
    if key == BUILTIN_KEY:
        return _embed(None, texts)
    connection = Connection.objects.filter(pk=int(key.split(":", 1)[0])).first()
    if connection is None:
        raise EmbedderFailed("the embedding connection of this index was deleted")
    return _embed(connection, texts)


def embed_query(key: str, text: str) -> list[float]:
    """Embed one short query with the model a key names (the built-in model on one thread)."""
    if key != BUILTIN_KEY:
        return embed_with(key, [text])[0]
    try:
        return embedder.embed_query(text)
    except Exception as exc:  # noqa: BLE001 - any embedder failure is reported, never a crash
        raise _failed(exc) from exc


def _failed(exc: Exception) -> EmbedderFailed:
    """Say why embedding failed: a model still warming up says so; a provider's failure is explained."""
    if isinstance(exc, embedder.StillWarming):
        return EmbedderFailed(str(exc))
    return EmbedderFailed(gateway.plain_error(exc))


def _embed(connection: Connection | None, texts: list[str]) -> list[list[float]]:
    vectors: list[list[float]] = []
    try:
        for start in range(0, len(texts), BATCH):
            batch = texts[start : start + BATCH]
            if connection is None:
                vectors.extend(embedder.embed(batch))
            else:
                vectors.extend(gateway.embed(gateway.target_for(connection), batch))
    except Exception as exc:  # noqa: BLE001 - any embedder failure is reported, never a crash
        raise _failed(exc) from exc
    return vectors
