from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from memory import selectors, services, tasks
from memory.forms import MemoryTuningForm, RememberForm
from rooms import permissions


def tuning(request: HttpRequest) -> HttpResponse:
    """Memory tuning: the owner and admins shape how memory is written and recalled."""
    if not request.user.can_manage_users:
        raise PermissionDenied("Only the owner and admins change memory tuning.")
    form = MemoryTuningForm(request.POST or None, instance=services.tuning_get())
    if request.method == "POST" and form.is_valid():
        services.tuning_update(form=form)
        messages.success(request, "Memory tuning saved. It applies to new work.")
        return redirect("memory:tuning")
    return render(request, "memory/tuning.html", {"form": form, "nav": "settings"})


@require_POST
def remember(request: HttpRequest) -> HttpResponse:
    """The per-person switch "Remember earlier in long chats"."""
    form = RememberForm(request.POST)
    form.is_valid()
    on = form.cleaned_data.get("remember_long_chats", False)
    services.remember_set(user=request.user, on=on)
    messages.success(
        request, "Memory is on for the chats you host." if on else "Memory is off for your chats."
    )
    return redirect("accounts:settings")


@require_POST
def backfill_start(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    tasks.backfill_start(room.pk)
    messages.success(request, "Building memory for this chat in the background; progress shows below.")
    return redirect("rooms:settings", pk=room.pk)


@require_POST
def backfill_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    tasks.backfill_cancel(room.pk)
    messages.success(
        request, "The backfill stops after the summary it is writing; press Build to continue later."
    )
    return redirect("rooms:settings", pk=room.pk)


@require_GET
def recall_detail(request: HttpRequest, pk: int) -> JsonResponse:
    """The host's recall detail for the last reply: a fresh check with the room's current settings."""
    room = permissions.room_for_host(request.user, pk)
    return JsonResponse(selectors.recall_fresh_check(room))
