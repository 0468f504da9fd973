from __future__ import annotations

from django.urls import path

from memory import views

app_name = "memory"

urlpatterns = [
    path("settings/memory/", views.tuning, name="tuning"),
    path("settings/memory/remember/", views.remember, name="remember"),
    path("chats/<int:pk>/memory/backfill/", views.backfill_start, name="backfill"),
    path("chats/<int:pk>/memory/recall/", views.recall_detail, name="recall_detail"),
    path("chats/<int:pk>/memory/backfill/cancel/", views.backfill_cancel, name="backfill_cancel"),
]
