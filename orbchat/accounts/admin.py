from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from orbchat.accounts.models import User


@admin.register(User)
class OrbChatUserAdmin(UserAdmin):
    list_display = ("username", "role", "is_active", "last_login")
    list_filter = ("role", "is_active")
    fieldsets = (*UserAdmin.fieldsets, ("OrbChat", {"fields": ("role",)}))
