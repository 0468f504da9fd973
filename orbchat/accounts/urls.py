from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from orbchat.accounts import views

app_name = "accounts"

urlpatterns = [
    path("setup/", views.setup, name="setup"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("settings/", views.settings_home, name="settings"),
    path(
        "settings/password/",
        auth_views.PasswordChangeView.as_view(
            template_name="accounts/password_change.html",
            success_url=reverse_lazy("accounts:password_done"),
        ),
        name="password_change",
    ),
    path(
        "settings/password/done/",
        auth_views.PasswordChangeDoneView.as_view(template_name="accounts/password_done.html"),
        name="password_done",
    ),
    path("settings/appearance/", views.appearance_set, name="appearance"),
    path("settings/tokens/", views.token_create, name="token_create"),
    path("settings/tokens/<int:token_id>/revoke/", views.token_revoke, name="token_revoke"),
    path("settings/users/", views.user_list, name="users"),
    path("settings/users/<int:user_id>/active/", views.user_set_active, name="user_set_active"),
]
