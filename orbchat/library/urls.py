from __future__ import annotations

from django.urls import path

from orbchat.library import views

app_name = "library"

urlpatterns = [
    path("characters/", views.character_list, name="characters"),
    path("characters/new/", views.character_create, name="character_create"),
    path("characters/<int:pk>/", views.character_detail, name="character"),
    path("characters/<int:pk>/favourite/", views.character_favourite, name="character_favourite"),
    path("characters/<int:pk>/duplicate/", views.character_duplicate, name="character_duplicate"),
    path("characters/<int:pk>/delete/", views.character_delete, name="character_delete"),
    path("characters/<int:pk>/export.<str:fmt>", views.character_export, name="character_export"),
    path("characters/<int:pk>/avatar/", views.character_avatar, name="character_avatar"),
    path("import/", views.import_files, name="import"),
    path("import/resolve/", views.import_resolve, name="import_resolve"),
    path("personas/", views.persona_list, name="personas"),
    path("personas/<int:pk>/", views.persona_detail, name="persona"),
    path("personas/<int:pk>/default/", views.persona_default, name="persona_default"),
    path("personas/<int:pk>/delete/", views.persona_delete, name="persona_delete"),
    path("personas/<int:pk>/avatar/", views.persona_avatar, name="persona_avatar"),
    path("presets/", views.preset_list, name="presets"),
    path("presets/<int:pk>/", views.preset_detail, name="preset"),
    path("presets/<int:pk>/sections/add/", views.preset_section_add, name="preset_section_add"),
    path("presets/<int:pk>/sections/<str:identifier>/", views.preset_section_edit, name="preset_section"),
    path(
        "presets/<int:pk>/sections/<str:identifier>/move/",
        views.preset_section_move,
        name="preset_section_move",
    ),
    path(
        "presets/<int:pk>/sections/<str:identifier>/delete/",
        views.preset_section_delete,
        name="preset_section_delete",
    ),
    path("presets/<int:pk>/duplicate/", views.preset_duplicate, name="preset_duplicate"),
    path("presets/<int:pk>/delete/", views.preset_delete, name="preset_delete"),
    path("presets/<int:pk>/export.json", views.preset_export, name="preset_export"),
    path("templates/", views.template_list, name="templates"),
    path("templates/<str:kind>/<int:pk>/export.json", views.template_export, name="template_export"),
    path("templates/<str:kind>/<int:pk>/delete/", views.template_delete, name="template_delete"),
    path("worldbooks/", views.worldbook_list, name="worldbooks"),
    path("worldbooks/<int:pk>/", views.worldbook_detail, name="worldbook"),
    path("worldbooks/<int:pk>/entries/new/", views.entry_edit, name="entry_create"),
    path("worldbooks/<int:pk>/entries/<int:entry_pk>/", views.entry_edit, name="entry"),
    path("worldbooks/<int:pk>/entries/<int:entry_pk>/delete/", views.entry_delete, name="entry_delete"),
    path("worldbooks/<int:pk>/try/", views.worldbook_try, name="worldbook_try"),
    path("worldbooks/<int:pk>/delete/", views.worldbook_delete, name="worldbook_delete"),
    path("worldbooks/<int:pk>/export.json", views.worldbook_export, name="worldbook_export"),
]
