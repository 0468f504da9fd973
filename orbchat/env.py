"""Read OrbChat's configuration from the environment.

Every setting that differs between a laptop and a deployment comes through here, so
production differs from local only by variables. A service (PostgreSQL, Redis, Chroma) is
used when its URL is set, and the embedded default otherwise.
"""

from __future__ import annotations

import gc
import os
import secrets
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

# Offline switches must be in the environment before sentence-transformers, huggingface_hub,
# chromadb or litellm are imported anywhere in the process (including Celery and daphne).
OFFLINE_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "ANONYMIZED_TELEMETRY": "False",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "TOKENIZERS_PARALLELISM": "false",
}


def apply_offline_defaults() -> None:
    """Set the variables that keep model libraries from reaching the network."""
    for name, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(name, value)


def freeze_long_lived_objects() -> None:
    """Move every object alive now out of the garbage collector's sight.

    Call once a process has loaded what it keeps for its whole life (Django, litellm, the
    tokenizer, the embedding model): hundreds of thousands of objects that a full collection
    would otherwise walk again and again, for a few hundred milliseconds each time, in the
    middle of someone's turn.
    """
    gc.freeze()


def get(name: str, default: str = "") -> str:
    """Return the variable's value, or the default when it is unset or empty."""
    return os.environ.get(name) or default


def get_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if not value:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def get_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ValueError(f"{name} must be a whole number, got {value!r}") from exc


def data_dir() -> Path:
    """Return the data directory (`var/` in the repo unless ORBCHAT_DATA_DIR is set), created."""
    path = Path(get("ORBCHAT_DATA_DIR", str(BASE_DIR / "var"))).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def secret_key() -> str:
    """Return SECRET_KEY, generating it once into the data directory when not given."""
    given = get("SECRET_KEY")
    if given:
        return given
    path = data_dir() / "secret_key"
    if not path.exists():
        # O_EXCL: two processes starting together must not write two different keys.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


def embedded_redis_socket() -> Path:
    return data_dir() / "redis.sock"


def redis_url() -> str:
    """Return REDIS_URL, or the embedded server's unix socket."""
    return get("REDIS_URL", f"unix://{embedded_redis_socket()}")


def celery_broker_url(url: str) -> str:
    """Translate a redis-py URL into kombu's spelling (kombu names unix sockets differently)."""
    if url.startswith("unix://"):
        return "redis+socket://" + url.removeprefix("unix://")
    return url


def chroma_port() -> int:
    return get_int("CHROMA_PORT", 8001)


def chroma_url() -> str:
    return get("CHROMA_URL", f"http://127.0.0.1:{chroma_port()}")
