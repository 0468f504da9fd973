from __future__ import annotations

from django.urls import path

from corpus import views

app_name = "corpus"

urlpatterns = [
    path("corpus/", views.explore, name="explore"),
    path("corpus/status/", views.status, name="status"),
    path("corpus/scenes/<int:room_pk>/<int:block>/", views.scene, name="scene"),
    path("corpus/memories/<int:summary_pk>/", views.memory, name="memory"),
]
