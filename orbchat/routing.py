from __future__ import annotations

from django.urls import path

from orbchat.consumers import SiteConsumer

websocket_urlpatterns = [
    path("ws/", SiteConsumer.as_asgi()),
]
