from __future__ import annotations

import mimetypes

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from memory import tasks as memory_tasks
from memory.selectors import memory_model_warming, memory_on, room_memory_status, tuning_get
from orbchat.connections.selectors import model_roles_get
from orbchat.interop import chats as chat_codec
from orbchat.interop.errors import InteropError
from orbchat.library import pending
from orbchat.library import selectors as library_selectors
from orbchat.library.models import Character
from rooms import chatfiles, members, permissions, presenters, selectors, services
from rooms.forms import (
    ChatImportForm,
    GroupChatForm,
    InviteLinkForm,
    InviteUserForm,
    MemberPersonaForm,
    RoomControlsForm,
    RoomSettingsForm,
    SeatAddForm,
    SeatForm,
)
from rooms.models import Invite, Seat
from rooms.options import RoomOptions, room_options
from rooms.prompting import NoChatModel, TurnContext, plan_turn


def chat_list(request: HttpRequest) -> HttpResponse:
    q, tag = request.GET.get("q", "").strip(), request.GET.get("tag", "").strip()
    rooms = list(selectors.chat_list(user=request.user, q=q, tag=tag))
    lines = selectors.chat_last_lines(rooms)
    needs_model = model_roles_get(user=request.user).chat_id is None
    context = {
        "rooms": rooms,
        "rows": [(room, lines.get(room.pk)) for room in rooms],
        "tags": selectors.chat_tags(user=request.user),
        "q": q,
        "tag": tag,
        "import_form": ChatImportForm(user=request.user),
        "needs_model": needs_model,
        "plays_as_guest": needs_model and selectors.plays_in_others_rooms(user=request.user),
        "invitations": selectors.pending_invitations(user=request.user),
        "nav": "home",
    }
    return render(request, "rooms/chat_list.html", context)


@require_POST
def chat_start(request: HttpRequest, character_pk: int) -> HttpResponse:
    character = library_selectors.owned(Character, user=request.user, pk=character_pk)
    room = services.room_create_from_character(host=request.user, character=character)
    return redirect("rooms:room", pk=room.pk)


def group_chat_new(request: HttpRequest) -> HttpResponse:
    """Pick two or more of your characters and how they take turns; start the chat."""
    form = GroupChatForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            room = services.room_create_group(
                host=request.user,
                characters=list(data["characters"]),
                title=data["title"],
                options=RoomOptions(reply_mode=data["reply_mode"], turn_order=data["turn_order"]),
            )
        except services.ActionRefused as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("rooms:room", pk=room.pk)
    return render(request, "rooms/group_new.html", {"form": form, "nav": "home"})


def _seq(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() else None


def room_detail(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_member(request.user, pk)
    at = _seq(request, "at")
    page = presenters.room_page(room, at=at, csrf_token=get_token(request))
    people = selectors.room_people(room)
    tuning = tuning_get()
    memory = memory_on(room, tuning) and tuning.mode != "off"
    context = {
        "room": room,
        "page": page,
        "at": at,
        "at_found": at in page.seqs,
        "is_host": room.host_id == request.user.pk,
        "options": room_options(room),
        "offer_for_me": room.host_offer_to_id == request.user.pk,
        "memory_on": memory,
        "memory_warming": memory and memory_model_warming(room.host),
        **people,
        "nav": "home",
    }
    if context["is_host"]:
        context["controls_form"] = RoomControlsForm(
            user=request.user, names=DRAWER_FIELDS, initial=_settings_initial(room), auto_id="controls-%s"
        )
    else:
        mine = next((m for m in people["members"] if m.user_id == request.user.pk), None)
        context["persona_form"] = MemberPersonaForm(
            user=request.user, initial={"persona": mine.persona if mine else None}, auto_id="controls-%s"
        )
    return render(request, "rooms/room.html", context)


# The settings the chat page's drawer offers the host; the settings page has them all.
DRAWER_FIELDS = (
    "persona",
    "preset",
    "world_books",
    "authors_note",
    "authors_note_depth",
    "authors_note_role",
    "reply_mode",
    "turn_order",
)


# What an avatar without a picture answers: a transparent image, so the speaker's initial drawn
# beneath it shows through and the image never reads as broken.
NO_PICTURE = b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"/>'


def _avatar_response(field) -> HttpResponse:
    if field:
        content_type = mimetypes.guess_type(field.name)[0] or "image/png"
        response = FileResponse(field.open("rb"), content_type=content_type)
    else:
        response = HttpResponse(NO_PICTURE, content_type="image/svg+xml")
    response["Cache-Control"] = "private, max-age=300"
    response["X-Content-Type-Options"] = "nosniff"
    return response


def seat_avatar(request: HttpRequest, pk: int, seat_pk: int) -> HttpResponse:
    """The picture of a seated character, for everyone in the room."""
    room = permissions.room_for_member(request.user, pk)
    return _avatar_response(selectors.seat_avatar(room, seat_pk=seat_pk))


def person_avatar(request: HttpRequest, pk: int, user_pk: int) -> HttpResponse:
    """The picture of the persona a person writes as in the room, for everyone in the room."""
    room = permissions.room_for_member(request.user, pk)
    return _avatar_response(selectors.person_avatar(room, user_pk=user_pk))


def persona_avatar(request: HttpRequest, pk: int, persona_pk: int) -> HttpResponse:
    """The picture of a persona a message in the room was written as, for everyone in the room."""
    room = permissions.room_for_member(request.user, pk)
    return _avatar_response(selectors.persona_avatar(room, persona_pk=persona_pk))


MESSAGES_PAGE = 50


def room_messages(request: HttpRequest, pk: int) -> HttpResponse:
    """The partials of the `MESSAGES_PAGE` messages just before `?before=N`, just after
    `?after=N`, or else the newest, oldest first, as the room page loads them while you scroll.
    `X-Earlier` and `X-Later` say whether the room has more on either side."""
    room = permissions.room_for_member(request.user, pk)
    before, after = _seq(request, "before"), _seq(request, "after")
    page = presenters.room_page(
        room, csrf_token=get_token(request), limit=MESSAGES_PAGE, before=before, after=after
    )
    response = HttpResponse(page.html)
    response["X-Earlier"] = "1" if page.earlier else "0"
    response["X-Later"] = "1" if page.later else "0"
    return response


def _refused(exc: Exception) -> JsonResponse:
    return JsonResponse({"error": str(exc)}, status=409)


@require_POST
def message_edit(request: HttpRequest, pk: int, message_pk: int) -> HttpResponse:
    message = permissions.message_for_author_or_host(request.user, pk, message_pk)
    try:
        services.message_edit(message=message, text=request.POST.get("text", ""))
    except services.ActionRefused as exc:
        return _refused(exc)
    return HttpResponse(presenters.message_html(message))


@require_POST
def message_hide(request: HttpRequest, pk: int, message_pk: int) -> HttpResponse:
    message = permissions.message_for_host(request.user, pk, message_pk)
    services.message_set_hidden(message=message, hidden=request.POST.get("hidden") == "1")
    return HttpResponse(presenters.message_html(message))


@require_POST
def message_delete(request: HttpRequest, pk: int, message_pk: int) -> HttpResponse:
    if request.POST.get("after") == "1":
        message = permissions.message_for_host(request.user, pk, message_pk)
    else:
        message = permissions.message_for_author_or_host(request.user, pk, message_pk)
    try:
        ids = services.message_delete(message=message, and_after=request.POST.get("after") == "1")
    except services.ActionRefused as exc:
        return _refused(exc)
    return JsonResponse({"deleted": ids})


@require_POST
def room_fork(request: HttpRequest, pk: int, message_pk: int) -> HttpResponse:
    message = permissions.message_for_host(request.user, pk, message_pk, write=False)
    fork = services.room_fork(room=message.room, at_seq=message.seq)
    messages.success(request, f"Forked at message #{message.seq}. The original chat is unchanged.")
    return redirect("rooms:room", pk=fork.pk)


def _settings_initial(room) -> dict:
    return {
        "title": room.title,
        "persona": room.persona,
        "preset": room.preset,
        "world_books": room.world_books.all(),
        "authors_note": room.authors_note,
        "authors_note_depth": room.authors_note_depth,
        "authors_note_role": room.authors_note_role,
        "tags": room.tags,
        **room_options(room).to_json(),
    }


def room_settings(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    initial = _settings_initial(room)
    form = RoomSettingsForm(request.POST or None, user=request.user, initial=initial, remember_shown=True)
    if request.method == "POST" and form.is_valid():
        # What the page showed came back with it: only the fields edited here are saved. A post
        # without those values (a script's) saves every field it holds.
        shown = any(key.startswith(form.add_initial_prefix("")) for key in request.POST)
        edited = form.changed_data if shown else list(form.cleaned_data)
        services.room_settings_update(room=room, **{name: form.cleaned_data[name] for name in edited})
        messages.success(request, "Chat settings saved.")
        return redirect("rooms:room", pk=room.pk)
    context = {"room": room, "form": form, "memory": room_memory_status(room), "nav": "home"}
    return render(request, "rooms/settings.html", context)


@require_POST
def room_controls(request: HttpRequest, pk: int) -> JsonResponse:
    """Change one or a few of the room's settings at once from the chat page (the host only).

    Each `field` names a setting posted, so a checkbox or a list of world books left empty reads
    as "none" rather than as "not sent". All of them are saved, or none: `{"saved": [names]}`,
    else 400 with `{"errors": {name: message}}`.
    """
    room = permissions.room_for_host(request.user, pk)
    permissions.ensure_writable(room)
    names = request.POST.getlist("field")
    if not names or any(name not in RoomControlsForm.FIELDS for name in names):
        return JsonResponse({"errors": {"__all__": "That setting cannot be changed here."}}, status=400)
    form = RoomControlsForm(request.POST, user=request.user, names=names)
    if not form.is_valid():
        errors = {name: " ".join(problems) for name, problems in form.errors.items()}
        return JsonResponse({"errors": errors}, status=400)
    services.room_settings_update(room=room, **form.cleaned_data)
    return JsonResponse({"saved": sorted(form.cleaned_data)})


def room_delete(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    if request.method == "POST":
        services.room_delete(room=room)
        messages.success(request, f"Chat “{room.title}” deleted.")
        return redirect("home")
    return render(request, "library/confirm_delete.html", {"object": room, "what": "chat", "nav": "home"})


def room_preview(request: HttpRequest, pk: int) -> HttpResponse:
    """The host's Prompt Preview: the last turn's exact prompt and the next turn's."""
    room = permissions.room_for_host(request.user, pk)
    next_prompt, problem = None, ""
    try:
        seat = None if room_options(room).narrator else services.speaking_seat(room)
        next_prompt = plan_turn(turn=TurnContext.of(room), seat=seat).preview()
    except (NoChatModel, services.ActionRefused) as exc:
        problem = str(exc)
    context = {
        "room": room,
        "last": selectors.last_prompt(room),
        "next": next_prompt,
        "problem": problem,
        "nav": "home",
    }
    return render(request, "rooms/preview.html", context)


def room_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    chat = chatfiles.chat_file(room)
    if fmt == "jsonl":
        response = HttpResponse(chat_codec.export_chat_jsonl(chat), content_type="application/jsonl")
    elif fmt == "txt":
        response = HttpResponse(chat_codec.export_chat_text(chat), content_type="text/plain; charset=utf-8")
    else:
        raise Http404("Unknown format.")
    name = "".join(c if c.isalnum() or c in " -_" else "_" for c in room.title).strip() or "chat"
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


@require_POST
def chat_import(request: HttpRequest) -> HttpResponse:
    """Import a chat file onto a character; a chat the user has already is asked about first."""
    form = ChatImportForm(request.POST, request.FILES, user=request.user)
    if not form.is_valid():
        for error in form.errors.values():
            messages.error(request, error.as_text())
        return redirect("home")
    upload = form.cleaned_data["file"]
    content = upload.read()
    character, build_memory = form.cleaned_data["character"], form.cleaned_data["build_memory"]
    try:
        room, problems = chatfiles.chat_import(
            host=request.user, character=character, content=content, allow_duplicate=False
        )
    except chatfiles.ChatDuplicate as exc:
        token = pending.hold(
            user=request.user,
            filename=upload.name,
            content=content,
            extra={"character": character.pk, "build_memory": build_memory},
        )
        context = {"existing": exc.existing, "file": upload.name, "token": token, "nav": "home"}
        return render(request, "rooms/import_duplicate.html", context)
    except InteropError as exc:
        messages.error(request, f"{upload.name}: {exc}")
        return redirect("home")
    return _chat_imported(request, upload.name, room, problems, build_memory=build_memory)


@require_POST
def chat_import_resolve(request: HttpRequest) -> HttpResponse:
    """Answer the duplicate question for a held chat file: import it as a copy, or skip it."""
    held = pending.take(user=request.user, token=request.POST.get("token", ""))
    if held is None:
        messages.error(request, "That chat file is no longer waiting: choose it again.")
        return redirect("home")
    if request.POST.get("action") != "copy":
        messages.info(request, f"{held.filename}: skipped, nothing imported.")
        return redirect("home")
    character = library_selectors.owned(Character, user=request.user, pk=held.extra.get("character"))
    try:
        room, problems = chatfiles.chat_import(host=request.user, character=character, content=held.content)
    except InteropError as exc:
        messages.error(request, f"{held.filename}: {exc}")
        return redirect("home")
    return _chat_imported(
        request, held.filename, room, problems, build_memory=bool(held.extra.get("build_memory"))
    )


def _chat_imported(request: HttpRequest, name: str, room, problems: list[str], *, build_memory: bool):
    if problems:
        messages.warning(request, f"{name}: imported, but skipped " + "; ".join(problems))
    else:
        messages.success(request, f"{name}: imported.")
    if build_memory:
        memory_tasks.backfill_start(room.pk)
    return redirect("rooms:room", pk=room.pk)


# People and seats ------------------------------------------------------------------------------


def room_people(request: HttpRequest, pk: int) -> HttpResponse:
    """Seats, the timeline and the people in the room; the host also manages them here."""
    room = permissions.room_for_member(request.user, pk)
    is_host = room.host_id == request.user.pk
    context = {"room": room, "is_host": is_host, **selectors.room_people(room), "nav": "home"}
    if is_host:
        context.update(
            seat_add_form=SeatAddForm(user=request.user, room=room),
            link_form=InviteLinkForm(),
            user_form=InviteUserForm(),
            invites=room.invites.filter(revoked_at__isnull=True).select_related("user"),
        )
    else:
        member = room.members.filter(user=request.user).first()
        context["persona_form"] = MemberPersonaForm(
            user=request.user, initial={"persona": member.persona if member else None}
        )
    if token := request.session.pop(f"invite-link-{room.pk}", None):
        context["new_link"] = request.build_absolute_uri(reverse("rooms:invite", args=[token]))
    return render(request, "rooms/people.html", context)


def _back(room_pk: int) -> HttpResponse:
    return redirect("rooms:people", pk=room_pk)


def _host_seat(request: HttpRequest, pk: int, seat_pk: int) -> Seat:
    room = permissions.room_for_host(request.user, pk)
    permissions.ensure_writable(room)
    seat = Seat.objects.filter(pk=seat_pk, room=room).select_related("room").first()
    if seat is None:
        raise Http404("No such seat.")
    return seat


@require_POST
def seat_add(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    permissions.ensure_writable(room)
    form = SeatAddForm(request.POST, user=request.user, room=room)
    if not form.is_valid():
        messages.error(request, "Choose one of your characters who is not seated.")
        return _back(room.pk)
    try:
        seat = services.seat_add(room=room, character=form.cleaned_data["character"])
    except services.ActionRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{seat.name} takes a seat from message #{room.next_seq}.")
    return _back(room.pk)


@require_POST
def seat_remove(request: HttpRequest, pk: int, seat_pk: int) -> HttpResponse:
    seat = _host_seat(request, pk, seat_pk)
    try:
        services.seat_remove(seat=seat)
    except services.ActionRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{seat.name} left the scene; earlier messages keep them.")
    return _back(seat.room_id)


@require_POST
def seat_update(request: HttpRequest, pk: int, seat_pk: int) -> HttpResponse:
    seat = _host_seat(request, pk, seat_pk)
    form = SeatForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Talkativeness must be a number between 0 and 1.")
        return _back(seat.room_id)
    services.seat_update(seat=seat, **form.cleaned_data)
    messages.success(request, f"{seat.name} updated.")
    return _back(seat.room_id)


@require_POST
def invite_link_create(request: HttpRequest, pk: int) -> HttpResponse:
    import datetime as dt

    room = permissions.room_for_host(request.user, pk)
    form = InviteLinkForm(request.POST)
    if not form.is_valid():
        for error in form.errors.values():
            messages.error(request, error.as_text())
        return _back(room.pk)
    hours = form.cleaned_data["expires_hours"]
    try:
        _, token = members.invite_link_create(
            room=room,
            by=request.user,
            expires_in=dt.timedelta(hours=hours) if hours else None,
            max_uses=form.cleaned_data["max_uses"],
        )
    except services.ActionRefused as exc:
        messages.error(request, str(exc))
        return _back(room.pk)
    # Shown once, on the next page: only its hash is stored.
    request.session[f"invite-link-{room.pk}"] = token
    return _back(room.pk)


@require_POST
def invite_user_create(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    form = InviteUserForm(request.POST)
    if form.is_valid():
        try:
            invite = members.invite_user_create(
                room=room, by=request.user, username=form.cleaned_data["username"]
            )
        except services.ActionRefused as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"Invited {invite.user.username}; they accept from their chat list.")
    else:
        messages.error(request, "Enter a username.")
    return _back(room.pk)


@require_POST
def invite_revoke(request: HttpRequest, pk: int, invite_pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    invite = Invite.objects.filter(pk=invite_pk, room=room).first()
    if invite is None:
        raise Http404("No such invitation.")
    members.invite_revoke(invite=invite)
    messages.success(request, "Invitation revoked.")
    return _back(room.pk)


def _invite_page(request: HttpRequest, invite: Invite | None) -> HttpResponse:
    """The preview before joining: the room's name, host and head count; nothing of its content."""
    problem = members.invite_problem(invite)
    if not problem and request.method == "POST":
        if request.POST.get("decline") and invite.user_id is not None:
            members.invite_decline(invite=invite, user=request.user)
            messages.success(request, "Invitation declined.")
            return redirect("home")
        try:
            room = members.invite_accept(invite=invite, user=request.user)
        except services.ActionRefused as exc:
            problem = str(exc)
        else:
            messages.success(request, f"You joined “{room.title}”.")
            return redirect("rooms:room", pk=room.pk)
    context = {"invite": invite, "problem": problem, "nav": "home"}
    if invite is not None and not problem:
        room = invite.room
        context.update(
            title=room.title,
            host=room.host.get_username(),
            people=1 + room.members.filter(state="active").count(),
        )
    return render(request, "rooms/invite.html", context, status=404 if invite is None else 200)


def invite_link(request: HttpRequest, token: str) -> HttpResponse:
    invite = (
        Invite.objects.filter(token_hash=members.token_hash(token), revoked_at__isnull=True)
        .select_related("room", "room__host")
        .first()
    )
    return _invite_page(request, invite)


def invitation(request: HttpRequest, invite_pk: int) -> HttpResponse:
    invite = (
        Invite.objects.filter(pk=invite_pk, user=request.user).select_related("room", "room__host").first()
    )
    if invite is None:
        raise Http404("No such invitation.")
    return _invite_page(request, invite)


@require_POST
def member_kick(request: HttpRequest, pk: int, user_pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    try:
        member = members.member_kick(room=room, user_id=user_pk)
    except services.ActionRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{member.user.username} was removed from the room.")
    return _back(room.pk)


@require_POST
def host_offer(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    raw = request.POST.get("user", "")
    try:
        members.host_offer(room=room, user_id=int(raw) if raw else None)
    except (ValueError, services.ActionRefused) as exc:
        messages.error(request, str(exc) if isinstance(exc, services.ActionRefused) else "Choose a member.")
    else:
        messages.success(
            request, "Offer sent; they become host when they accept." if raw else "Offer withdrawn."
        )
    return _back(room.pk)


@require_POST
def host_accept(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_member(request.user, pk)
    try:
        members.host_accept(room=room, user=request.user)
    except services.ActionRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "You are now the host of this room.")
    return redirect("rooms:room", pk=room.pk)


@require_POST
def room_leave(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_member(request.user, pk)
    members.room_leave(room=room, user=request.user)
    if room.host_id == request.user.pk:
        messages.success(request, f"You left “{room.title}”; it is archived.")
    else:
        messages.success(request, f"You left “{room.title}”.")
    return redirect("home")


@require_POST
def member_persona(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_member(request.user, pk)
    if room.host_id == request.user.pk:
        raise PermissionDenied("The host's persona is set in the room's settings.")
    form = MemberPersonaForm(request.POST, user=request.user)
    # The chat page's drawer asks for JSON and shows the answer beside the field.
    wants_json = request.headers.get("Accept") == "application/json"
    if not form.is_valid():
        problem = "Choose one of your personas."
        if wants_json:
            return JsonResponse({"errors": {"persona": problem}}, status=400)
        messages.error(request, problem)
        return _back(room.pk)
    members.member_set_persona(room=room, user=request.user, persona=form.cleaned_data["persona"])
    if wants_json:
        return JsonResponse({"saved": ["persona"]})
    messages.success(request, "Your persona in this room is saved.")
    return _back(room.pk)
