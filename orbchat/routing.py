from __future__ import annotations

from django.urls import path

from orbchat.consumers import SiteConsumer
from rooms.consumers import RoomConsumer

websocket_urlpatterns = [
    path("ws/", SiteConsumer.as_asgi()),
    path("ws/rooms/<int:room_id>/", RoomConsumer.as_asgi()),
]
