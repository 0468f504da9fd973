from __future__ import annotations

from django.urls import path

from rooms import views

app_name = "rooms"

urlpatterns = [
    path("characters/<int:character_pk>/chat/", views.chat_start, name="start"),
    path("chats/import/", views.chat_import, name="import"),
    path("chats/<int:pk>/", views.room_detail, name="room"),
    path("chats/<int:pk>/settings/", views.room_settings, name="settings"),
    path("chats/<int:pk>/delete/", views.room_delete, name="delete"),
    path("chats/<int:pk>/preview/", views.room_preview, name="preview"),
    path("chats/<int:pk>/export.<str:fmt>", views.room_export, name="export"),
    path("chats/<int:pk>/messages/<int:message_pk>/edit/", views.message_edit, name="message_edit"),
    path("chats/<int:pk>/messages/<int:message_pk>/hide/", views.message_hide, name="message_hide"),
    path("chats/<int:pk>/messages/<int:message_pk>/delete/", views.message_delete, name="message_delete"),
    path("chats/<int:pk>/messages/<int:message_pk>/fork/", views.room_fork, name="fork"),
]
