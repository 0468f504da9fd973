from __future__ import annotations

from django.urls import path

from memory import views

app_name = "memory"

urlpatterns = [
    path("settings/memory/", views.tuning, name="tuning"),
    path("settings/memory/remember/", views.remember, name="remember"),
    path("chats/<int:pk>/memory/backfill/", views.backfill_start, name="backfill"),
    path("chats/<int:pk>/memory/model/", views.model_state, name="model_state"),
    path("chats/<int:pk>/memory/recall/", views.recall_detail, name="recall_detail"),
    path("chats/<int:pk>/memory/context/<int:variant_pk>/", views.context_used, name="context_used"),
    path("chats/<int:pk>/memory/backfill/status/", views.backfill_status, name="backfill_status"),
    path("chats/<int:pk>/memory/backfill/cancel/", views.backfill_cancel, name="backfill_cancel"),
    path("chats/<int:pk>/memory/cycle/start/", views.cycle_start, name="cycle_start"),
    path("chats/<int:pk>/memory/cycle/skip/", views.cycle_skip, name="cycle_skip"),
    path("chats/<int:pk>/memory/cycle/cancel/", views.cycle_cancel, name="cycle_cancel"),
    path("chats/<int:pk>/memory/", views.panel, name="panel"),
    path("chats/<int:pk>/memory/map/", views.tier_map, name="map"),
    path("chats/<int:pk>/memory/add/", views.summary_add, name="add"),
    path("chats/<int:pk>/memory/generate/", views.generate_next, name="generate"),
    path("chats/<int:pk>/memory/rebuild/", views.rebuild, name="rebuild"),
    path("chats/<int:pk>/memory/scene/", views.scene_note, name="scene"),
    path("chats/<int:pk>/memory/facts/", views.facts, name="facts"),
    path("chats/<int:pk>/memory/facts/add/", views.fact_add, name="fact_add"),
    path("chats/<int:pk>/memory/facts/<int:fact_pk>/", views.fact_detail, name="fact"),
    path("chats/<int:pk>/memory/facts/<int:fact_pk>/edit/", views.fact_edit, name="fact_edit"),
    path("chats/<int:pk>/memory/facts/<int:fact_pk>/pin/", views.fact_pin, name="fact_pin"),
    path("chats/<int:pk>/memory/facts/<int:fact_pk>/forget/", views.fact_forget, name="fact_forget"),
    path("chats/<int:pk>/memory/facts/<int:fact_pk>/restore/", views.fact_restore, name="fact_restore"),
    path("chats/<int:pk>/memory/<int:summary_pk>/", views.summary_detail, name="summary"),
    path("chats/<int:pk>/memory/<int:summary_pk>/edit/", views.summary_edit, name="edit"),
    path("chats/<int:pk>/memory/<int:summary_pk>/pin/", views.summary_pin, name="pin"),
    path("chats/<int:pk>/memory/<int:summary_pk>/forget/", views.summary_forget, name="forget"),
]
