"""ASGI entry point: Django views over HTTP and the Channels websocket routes."""

from __future__ import annotations

import os
import threading

from orbchat import env

env.apply_offline_defaults()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "orbchat.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

from orbchat.httplimit import ConcurrencyLimit  # noqa: E402

django_asgi_app = ConcurrencyLimit(get_asgi_application())

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from orbchat import health  # noqa: E402
from orbchat.connections import embedder, gateway  # noqa: E402
from orbchat.origins import SameOriginValidator  # noqa: E402
from orbchat.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)


def _warm_up() -> None:
    """Import litellm and load its tokenizer now, not inside the first person's request (it takes
    seconds: docs/benchmarks.md); then keep the collector from walking all that again
    (`env.freeze_long_lived_objects`). /healthz reads "warming up" until it is done."""
    try:
        gateway.count_tokens("warm up")
        env.freeze_long_lived_objects()
    finally:
        health.warmed("litellm")


health.warming("litellm")
threading.Thread(target=_warm_up, name="warm-up", daemon=True).start()
# The embedding model loads in the background from now; a reply waits for it at most
# embedder.WARM_WAIT_SECONDS, and the chat page says "warming up the memory model…" meanwhile.
embedder.serve_web()
