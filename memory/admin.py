from __future__ import annotations

from django.contrib import admin

from memory.models import MemoryTuning, RoomMemory, Summary, VectorIndex


@admin.register(MemoryTuning)
class MemoryTuningAdmin(admin.ModelAdmin):
    readonly_fields = ["custom_prompts"]  # validated where they are edited: Memory tuning

    def has_add_permission(self, request) -> bool:
        return not MemoryTuning.objects.exists()  # one row of settings


@admin.register(Summary)
class SummaryAdmin(admin.ModelAdmin):
    list_display = ["room", "scope", "tier", "block", "seq_from", "seq_to", "source", "stale"]
    list_filter = ["source", "stale", "tier"]
    search_fields = ["text", "heading"]


admin.site.register(RoomMemory)
admin.site.register(VectorIndex)
