from __future__ import annotations

from django.urls import path

from rooms import views

app_name = "rooms"

urlpatterns = [
    path("characters/<int:character_pk>/chat/", views.chat_start, name="start"),
    path("chats/import/", views.chat_import, name="import"),
    path("chats/import/resolve/", views.chat_import_resolve, name="import_resolve"),
    path("chats/new/", views.group_chat_new, name="new"),
    path("chats/<int:pk>/", views.room_detail, name="room"),
    path("chats/<int:pk>/messages/", views.room_messages, name="messages"),
    path("chats/<int:pk>/settings/", views.room_settings, name="settings"),
    path("chats/<int:pk>/controls/", views.room_controls, name="controls"),
    path("chats/<int:pk>/delete/", views.room_delete, name="delete"),
    path("chats/<int:pk>/preview/", views.room_preview, name="preview"),
    path("chats/<int:pk>/export.<str:fmt>", views.room_export, name="export"),
    path("chats/<int:pk>/messages/<int:message_pk>/edit/", views.message_edit, name="message_edit"),
    path("chats/<int:pk>/messages/<int:message_pk>/hide/", views.message_hide, name="message_hide"),
    path("chats/<int:pk>/messages/<int:message_pk>/delete/", views.message_delete, name="message_delete"),
    path("chats/<int:pk>/messages/<int:message_pk>/fork/", views.room_fork, name="fork"),
    path("chats/<int:pk>/seats/<int:seat_pk>/avatar/", views.seat_avatar, name="seat_avatar"),
    path("chats/<int:pk>/people/<int:user_pk>/avatar/", views.person_avatar, name="person_avatar"),
    path("chats/<int:pk>/personas/<int:persona_pk>/avatar/", views.persona_avatar, name="persona_avatar"),
    path("chats/<int:pk>/people/", views.room_people, name="people"),
    path("chats/<int:pk>/seats/add/", views.seat_add, name="seat_add"),
    path("chats/<int:pk>/seats/<int:seat_pk>/", views.seat_update, name="seat_update"),
    path("chats/<int:pk>/seats/<int:seat_pk>/remove/", views.seat_remove, name="seat_remove"),
    path("chats/<int:pk>/invites/link/", views.invite_link_create, name="invite_link_create"),
    path("chats/<int:pk>/invites/user/", views.invite_user_create, name="invite_user_create"),
    path("chats/<int:pk>/invites/<int:invite_pk>/revoke/", views.invite_revoke, name="invite_revoke"),
    path("chats/<int:pk>/members/<int:user_pk>/kick/", views.member_kick, name="kick"),
    path("chats/<int:pk>/persona/", views.member_persona, name="member_persona"),
    path("chats/<int:pk>/host/offer/", views.host_offer, name="host_offer"),
    path("chats/<int:pk>/host/accept/", views.host_accept, name="host_accept"),
    path("chats/<int:pk>/leave/", views.room_leave, name="leave"),
    path("invite/<str:token>/", views.invite_link, name="invite"),
    path("invitations/<int:invite_pk>/", views.invitation, name="invitation"),
]
