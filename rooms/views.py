from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from orbchat.interop import chats as chat_codec
from orbchat.interop.errors import InteropError
from orbchat.library import selectors as library_selectors
from orbchat.library.models import Character
from rooms import chatfiles, permissions, presenters, selectors, services
from rooms.forms import ChatImportForm, RoomSettingsForm
from rooms.models import Message
from rooms.prompting import NoChatModel, plan_turn


def chat_list(request: HttpRequest) -> HttpResponse:
    from orbchat.connections.services import model_roles_get

    q, tag = request.GET.get("q", "").strip(), request.GET.get("tag", "").strip()
    context = {
        "rooms": selectors.chat_list(user=request.user, q=q, tag=tag),
        "tags": selectors.chat_tags(user=request.user),
        "q": q,
        "tag": tag,
        "import_form": ChatImportForm(user=request.user),
        "needs_model": model_roles_get(user=request.user).chat_id is None,
        "nav": "home",
    }
    return render(request, "rooms/chat_list.html", context)


@require_POST
def chat_start(request: HttpRequest, character_pk: int) -> HttpResponse:
    character = library_selectors.owned(Character, user=request.user, pk=character_pk)
    room = services.room_create_from_character(host=request.user, character=character)
    return redirect("rooms:room", pk=room.pk)


def room_detail(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    views = presenters.room_views(room)
    context = {
        "room": room,
        "views": views,
        "hidden_before": max(0, room.messages.count() - len(views)),
        "seats": room.seats.all(),
        "nav": "home",
    }
    return render(request, "rooms/room.html", context)


def _message(request: HttpRequest, pk: int, message_pk: int) -> Message:
    room = permissions.room_for_host(request.user, pk)
    message = Message.objects.filter(pk=message_pk, room=room).select_related("room").first()
    if message is None:
        raise Http404("No such message.")
    return message


def _refused(exc: Exception) -> JsonResponse:
    return JsonResponse({"error": str(exc)}, status=409)


@require_POST
def message_edit(request: HttpRequest, pk: int, message_pk: int) -> HttpResponse:
    message = _message(request, pk, message_pk)
    try:
        services.message_edit(message=message, text=request.POST.get("text", ""))
    except services.ActionRefused as exc:
        return _refused(exc)
    return HttpResponse(presenters.message_html(message))


@require_POST
def message_hide(request: HttpRequest, pk: int, message_pk: int) -> HttpResponse:
    message = _message(request, pk, message_pk)
    services.message_set_hidden(message=message, hidden=request.POST.get("hidden") == "1")
    return HttpResponse(presenters.message_html(message))


@require_POST
def message_delete(request: HttpRequest, pk: int, message_pk: int) -> HttpResponse:
    message = _message(request, pk, message_pk)
    try:
        ids = services.message_delete(message=message, and_after=request.POST.get("after") == "1")
    except services.ActionRefused as exc:
        return _refused(exc)
    return JsonResponse({"deleted": ids})


@require_POST
def room_fork(request: HttpRequest, pk: int, message_pk: int) -> HttpResponse:
    message = _message(request, pk, message_pk)
    fork = services.room_fork(room=message.room, at_seq=message.seq)
    messages.success(request, f"Forked at message #{message.seq}. The original chat is unchanged.")
    return redirect("rooms:room", pk=fork.pk)


def room_settings(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    initial = {
        "title": room.title,
        "persona": room.persona,
        "preset": room.preset,
        "world_books": room.world_books.all(),
        "authors_note": room.authors_note,
        "authors_note_depth": room.authors_note_depth,
        "authors_note_role": room.authors_note_role,
        "tags": room.tags,
    }
    form = RoomSettingsForm(request.POST or None, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        services.room_update(room=room, **form.cleaned_data)
        messages.success(request, "Chat settings saved.")
        return redirect("rooms:room", pk=room.pk)
    return render(request, "rooms/settings.html", {"room": room, "form": form, "nav": "home"})


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
        seat = services.speaking_seat(room)
        next_prompt = plan_turn(room=room, seat=seat).preview()
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
    form = ChatImportForm(request.POST, request.FILES, user=request.user)
    if not form.is_valid():
        for error in form.errors.values():
            messages.error(request, error.as_text())
        return redirect("home")
    upload = form.cleaned_data["file"]
    try:
        room, problems = chatfiles.chat_import(
            host=request.user, character=form.cleaned_data["character"], content=upload.read()
        )
    except InteropError as exc:
        messages.error(request, f"{upload.name}: {exc}")
        return redirect("home")
    if problems:
        messages.warning(request, f"{upload.name}: imported, but skipped " + "; ".join(problems))
    else:
        messages.success(request, f"{upload.name}: imported.")
    return redirect("rooms:room", pk=room.pk)
