from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from orbchat import api, views
from rooms import views as rooms_views

urlpatterns = [
    path("", rooms_views.chat_list, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("", include("orbchat.accounts.urls")),
    path("", include("orbchat.library.urls")),
    path("", include("orbchat.connections.urls")),
    path("", include("rooms.urls")),
    path("", include("memory.urls")),
    path("", include("corpus.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls()),
]

handler500 = "orbchat.views.server_error"
