"""The vector store: one Chroma server reached over HTTP (CHROMA_URL), telemetry off."""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

from django.conf import settings

_client = None
_client_url = None
_lock = threading.Lock()


def client():
    """Return a chromadb HttpClient for settings.CHROMA_URL, made on first use."""
    global _client, _client_url
    url = settings.CHROMA_URL
    with _lock:
        if _client is None or _client_url != url:
            import chromadb
            from chromadb.config import Settings

            parts = urlsplit(url)
            _client = chromadb.HttpClient(
                host=parts.hostname or "127.0.0.1",
                port=parts.port or (443 if parts.scheme == "https" else 8000),
                ssl=parts.scheme == "https",
                settings=Settings(anonymized_telemetry=False),
            )
            _client_url = url
    return _client


def heartbeat() -> int:
    """Ask the server for its heartbeat; raise when it cannot be reached."""
    return client().heartbeat()
