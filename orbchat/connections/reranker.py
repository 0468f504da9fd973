"""The Rerank role: reorder candidate texts by how well they answer a query.

Three kinds, chosen per user in Model roles:
- **builtin** (default, no download): a hybrid of the bundled MiniLM embedder's cosine
  similarity and a BM25-style lexical score over the candidates. The bi-encoder catches
  paraphrase; the lexical part rewards the rare, exact words (names, places, objects) that
  roleplay memories hinge on and that small embedders blur. The lexical scores are scaled to
  the best candidate's, then blended with the cosine on its own scale.
- **local**: a sentence-transformers CrossEncoder loaded from a folder on this machine.
- **remote**: any rerank API litellm reaches (Cohere, Jina, Voyage, Infinity, vLLM…).
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from pathlib import Path

from django.conf import settings

from orbchat.connections import embedder, gateway
from orbchat.connections.models import ModelRoles

SEMANTIC_WEIGHT = 0.7
LEXICAL_WEIGHT = 0.3
_TOKEN = re.compile(r"[\w']+")
_STOPWORDS = frozenset(
    "a an and are as at be but by for from had has have he her his i in is it its of on or she that the "
    "their them they this to was were will with you your".split()
)

_cross_encoders: dict[str, object] = {}
_lock = threading.Lock()


class RerankFailed(Exception):
    """The reranker could not score the candidates; the message says why in plain words."""


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


def lexical_scores(query: str, documents: list[str], *, k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Return BM25 scores of each document for the query, with IDF over the documents themselves."""
    docs = [_tokens(d) for d in documents]
    if not docs:
        return []
    avg_len = sum(len(d) for d in docs) / len(docs) or 1.0
    frequency = Counter(term for d in docs for term in set(d))
    scores = []
    for doc in docs:
        counts = Counter(doc)
        score = 0.0
        for term in set(_tokens(query)):
            if term not in counts:
                continue
            idf = math.log(1 + (len(docs) - frequency[term] + 0.5) / (frequency[term] + 0.5))
            tf = counts[term]
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avg_len))
        scores.append(score)
    return scores


def blend(semantic: list[float], lexical: list[float]) -> list[float]:
    """Blend cosine similarities with lexical scores (pure).

    Cosine is kept on its own scale (clamped to 0..1): stretching it over the candidates would
    turn a difference of a thousandth into the whole range. The lexical scores are divided by the
    best one, so the rarest exact words count fully and none count for nothing.
    """
    top = max(lexical, default=0.0)
    lex = [x / top if top > 0 else 0.0 for x in lexical]
    return [
        SEMANTIC_WEIGHT * min(1.0, max(0.0, s)) + LEXICAL_WEIGHT * x
        for s, x in zip(semantic, lex, strict=True)
    ]


def builtin_scores(query: str, documents: list[str]) -> list[float]:
    vectors = embedder.embed([query, *documents])
    q = vectors[0]
    semantic = [sum(a * b for a, b in zip(q, d, strict=True)) for d in vectors[1:]]
    return blend(semantic, lexical_scores(query, documents))


def local_folder(path: str) -> Path:
    """Return the folder of a local CrossEncoder, refused unless it lies in LOCAL_MODELS_DIR.

    Only administrators reach this (`scores_for`, `model_roles_update`): a path is a question
    about the server's disk, and its answer (found / not found) must not reach anyone else.
    """
    root = settings.LOCAL_MODELS_DIR
    folder = (root / path).resolve() if not Path(path).is_absolute() else Path(path).resolve()
    if not folder.is_relative_to(root):
        raise RerankFailed(f"A local CrossEncoder must be a folder inside {root}.")
    return folder


def local_scores(path: str, query: str, documents: list[str]) -> list[float]:
    folder = local_folder(path)
    if not folder.is_dir():
        raise RerankFailed(f"No CrossEncoder model folder at {folder}.")
    key = str(folder)
    with _lock:
        model = _cross_encoders.get(key)
        if model is None:
            from sentence_transformers import CrossEncoder

            try:
                model = CrossEncoder(key, device="cpu", local_files_only=True)
            except Exception as exc:  # noqa: BLE001 - any load failure is reported in words
                raise RerankFailed(f"The CrossEncoder at {folder} could not be loaded: {exc}") from exc
            _cross_encoders[key] = model
    return [float(s) for s in model.predict([(query, d) for d in documents])]


def remote_scores(target: gateway.Target, query: str, documents: list[str]) -> list[float]:
    try:
        return gateway.rerank(target, query, documents)
    except Exception as exc:  # noqa: BLE001 - any provider failure is reported in words
        raise RerankFailed(gateway.plain_error(exc)) from exc


def scores_for(roles: ModelRoles, query: str, documents: list[str]) -> list[float]:
    """Score documents with the user's Rerank role; raise RerankFailed in plain words."""
    if not documents:
        return []
    if roles.rerank_kind == ModelRoles.Rerank.LOCAL:
        if not roles.user.can_manage_users:
            raise RerankFailed("Only an administrator can use a local CrossEncoder folder.")
        return local_scores(roles.rerank_local_path, query, documents)
    if roles.rerank_kind == ModelRoles.Rerank.REMOTE:
        if roles.rerank is None:
            raise RerankFailed("Remote rerank is chosen but no connection is set.")
        return remote_scores(gateway.target_for(roles.rerank), query, documents)
    return builtin_scores(query, documents)


def recall_scores(
    roles: ModelRoles,
    query: str,
    documents: list[str],
    *,
    newest: str = "",
    cosines: list[float] | None = None,
) -> list[float]:
    """Score recall's shortlist with the user's Rerank role.

    `cosines` are the shortlist's similarities when the search used the built-in embedder: the
    built-in reranker is the same model, so it reuses them (the query's vector already leans on
    the message just sent) and blends in the exact words of `newest`, the message just sent.
    """
    if roles.rerank_kind == ModelRoles.Rerank.BUILTIN and cosines is not None:
        return blend(cosines, lexical_scores(newest or query, documents))
    return scores_for(roles, query, documents)
