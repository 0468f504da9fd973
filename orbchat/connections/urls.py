from __future__ import annotations

from django.urls import path

from orbchat.connections import views

app_name = "connections"

urlpatterns = [
    path("settings/models/", views.connection_list, name="list"),
    path("settings/models/connect/", views.connect, name="connect"),
    path("settings/models/use-chat-for-memory/", views.use_chat_for_memory, name="use_chat_for_memory"),
    path("settings/models/rerank-test/", views.rerank_test, name="rerank_test"),
    path("settings/models/new/", views.connection_create, name="create"),
    path("settings/models/<int:pk>/", views.connection_detail, name="detail"),
    path("settings/models/<int:pk>/test/", views.connection_test, name="test"),
    path("settings/models/<int:pk>/delete/", views.connection_delete, name="delete"),
]
