from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from memory import selectors, tasks, turn_memory
from memory.forms import (
    MemoryAddForm,
    MemoryTextForm,
    MemoryTuningForm,
    PanelFilterForm,
    RebuildForm,
    RememberForm,
)
from memory.services import person, runs
from memory.services import tuning as tuning_services
from rooms import permissions


def tuning(request: HttpRequest) -> HttpResponse:
    """Memory tuning: the owner and admins shape how memory is written and recalled."""
    if not request.user.can_manage_users:
        raise PermissionDenied("Only the owner and admins change memory tuning.")
    form = MemoryTuningForm(request.POST or None, instance=selectors.tuning_get())
    if request.method == "POST" and form.is_valid():
        tuning_services.tuning_update(form=form)
        messages.success(request, "Memory tuning saved. It applies to new work.")
        return redirect("memory:tuning")
    return render(request, "memory/tuning.html", {"form": form, "nav": "settings"})


@require_POST
def remember(request: HttpRequest) -> HttpResponse:
    """The per-person switch "Remember earlier in long chats"."""
    form = RememberForm(request.POST)
    form.is_valid()
    on = form.cleaned_data.get("remember_long_chats", False)
    tuning_services.remember_set(user=request.user, on=on)
    messages.success(
        request, "Memory is on for the chats you host." if on else "Memory is off for your chats."
    )
    return redirect("accounts:settings")


@require_GET
def model_state(request: HttpRequest, pk: int) -> JsonResponse:
    """Whether this chat's memory model is still warming up (the chat page asks until it is not)."""
    room = permissions.room_for_member(request.user, pk)
    return JsonResponse({"warming": selectors.memory_model_warming(room.host)})


@require_POST
def backfill_start(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    tasks.backfill_start(room.pk)
    messages.success(request, f"Building memory for “{room.title}” in the background.")
    if request.POST.get("next"):
        return _back(request, room)
    return redirect("rooms:settings", pk=room.pk)


@require_GET
def backfill_status(request: HttpRequest, pk: int) -> HttpResponse:
    """The backfill part of the chat's settings page (polled while a backfill is queued or running)."""
    room = permissions.room_for_host(request.user, pk)
    context = {"room": room, "backfill": selectors.backfill_progress(room.pk)}
    return render(request, "memory/_backfill.html", context)


@require_POST
def backfill_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    tasks.backfill_cancel(room.pk)
    messages.success(
        request, "The backfill stops after the summary it is writing; press Build to continue later."
    )
    return redirect("rooms:settings", pk=room.pk)


def _cycle_answer(request: HttpRequest, room, text: str) -> HttpResponse:
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"ok": True, "text": text})
    messages.success(request, text)
    return redirect("rooms:room", pk=room.pk)


@require_POST
def cycle_start(request: HttpRequest, pk: int) -> HttpResponse:
    """Start now / Update memory now: run the room's memory cycle (the host only)."""
    room = permissions.room_for_host(request.user, pk)
    runs.cycle_start(room=room)
    return _cycle_answer(request, room, "Updating memory…")


@require_POST
def cycle_skip(request: HttpRequest, pk: int) -> HttpResponse:
    """Skip: not now; asked again once more messages make a new batch due (the host only)."""
    room = permissions.room_for_host(request.user, pk)
    runs.batch_skip(room=room)
    return _cycle_answer(request, room, "Skipped; you will be asked again after more messages.")


@require_POST
def cycle_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel the running cycle after the model call it is in (the host only)."""
    room = permissions.room_for_host(request.user, pk)
    runs.cycle_cancel(room=room)
    return _cycle_answer(request, room, "Memory update stops after the current step.")


@require_GET
def recall_detail(request: HttpRequest, pk: int) -> JsonResponse:
    """The host's recall detail for the last reply: a fresh check with the room's current settings."""
    room = permissions.room_for_host(request.user, pk)
    return JsonResponse(turn_memory.recall_fresh_check(room))


# The Memory panel ------------------------------------------------------------------------------


def _back(request: HttpRequest, room) -> HttpResponse:
    """Return to the page the action came from (same site only), else the panel."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return redirect(target)
    return redirect("memory:panel", pk=room.pk)


def _refused(request: HttpRequest, room, exc: person.MemoryRefused) -> HttpResponse:
    messages.error(request, str(exc))
    return _back(request, room)


@require_GET
def panel(request: HttpRequest, pk: int) -> HttpResponse:
    """Every memory of a room, searchable and by tier; the host also edits and steers them."""
    room, who = permissions.room_for_memory_reader(request.user, pk)
    form = PanelFilterForm(request.GET or None)
    q, show, tier = "", "all", None
    if form.is_valid():
        q = form.cleaned_data["q"] or ""
        show = form.cleaned_data["show"] or "all"
        tier = form.cleaned_data["tier"]
    page = Paginator(selectors.memory_list(room, q=q, tier=tier, show=show), selectors.PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    host = who == permissions.HOST
    context = {
        "room": room,
        "page": page,
        "form": form,
        "q": q,
        "show": show,
        "tier": tier,
        "can_edit": host,
        "status": selectors.room_memory_status(room),
        "gaps": selectors.memory_gaps(room),
        "add_form": MemoryAddForm() if host else None,
        "memory_on": selectors.memory_on(room),
        "summariser": selectors.summariser_status(request.user) if host else None,
        "rewrite": selectors.builtin_rewrite(room) if host else None,
        "nav": "home",
    }
    return render(request, "memory/panel.html", context)


@require_GET
def summary_detail(request: HttpRequest, pk: int, summary_pk: int) -> HttpResponse:
    """One memory with the messages it covers."""
    room, who = permissions.room_for_memory_reader(request.user, pk)
    summary = selectors.memory_get(room, summary_pk)
    if summary is None:
        raise Http404("That memory no longer exists.")
    context = {
        "room": room,
        "s": summary,
        "can_edit": who == permissions.HOST,
        "lines": selectors.memory_messages(room, summary),
        "nav": "home",
    }
    return render(request, "memory/summary.html", context)


@require_GET
def tier_map(request: HttpRequest, pk: int) -> HttpResponse:
    """The picture of a room's memory over its messages."""
    room, who = permissions.room_for_memory_reader(request.user, pk)
    host = who == permissions.HOST
    context = {"room": room, "map": selectors.tier_map(room, detail=host), "can_edit": host, "nav": "home"}
    return render(request, "memory/map.html", context)


@require_POST
def summary_edit(request: HttpRequest, pk: int, summary_pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    form = MemoryTextForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(form.errors["text"]))
        return _back(request, room)
    try:
        summary, notice = person.memory_edit(room=room, summary_id=summary_pk, text=form.cleaned_data["text"])
    except person.MemoryRefused as exc:
        return _refused(request, room, exc)
    messages.success(request, f"{summary.label} is now yours: it is never rewritten automatically.")
    if notice:
        messages.warning(request, notice)
    return _back(request, room)


@require_POST
def summary_pin(request: HttpRequest, pk: int, summary_pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    pinned = request.POST.get("pinned") == "1"
    try:
        summary = person.memory_pin(room=room, summary_id=summary_pk, pinned=pinned)
    except person.MemoryRefused as exc:
        return _refused(request, room, exc)
    messages.success(
        request,
        f"{summary.label} is pinned: it is sent with every reply, within the memory budget."
        if pinned
        else f"{summary.label} is no longer pinned.",
    )
    return _back(request, room)


@require_POST
def summary_forget(request: HttpRequest, pk: int, summary_pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    try:
        summary = person.memory_forget(room=room, summary_id=summary_pk)
    except person.MemoryRefused as exc:
        return _refused(request, room, exc)
    if summary.added:
        messages.success(request, "Memory forgotten.")
    else:
        messages.success(
            request,
            f"Forgotten: {summary.span_label} now have no tier-{summary.tier} memory. "
            "It stays that way until you rebuild it (see “Not covered” below).",
        )
    return redirect("memory:panel", pk=room.pk)


@require_POST
def summary_add(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    form = MemoryAddForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{form.fields[field].label or field.title()}: {' '.join(errors)}")
        return _back(request, room)
    data = form.cleaned_data
    try:
        summary, notice = person.memory_add(
            room=room,
            text=data["text"],
            seq_from=data["seq_from"],
            seq_to=data["seq_to"],
            pinned=data["pinned"],
        )
    except person.MemoryRefused as exc:
        return _refused(request, room, exc)
    messages.success(
        request, "Memory added. It is yours and is sent with every reply, within the memory budget."
    )
    if notice:
        messages.warning(request, notice)
    return _back(request, room)


@require_POST
def generate_next(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    try:
        summary = person.memory_generate_next(room=room)
    except person.MemoryRefused as exc:
        return _refused(request, room, exc)
    if summary is None:
        messages.info(request, "Every message before the newest already has a memory.")
    else:
        messages.success(request, f"New memory: {summary.label}. Press again to continue.")
    return _back(request, room)


@require_POST
def rebuild(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    form = RebuildForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose the message to rebuild from.")
        return _back(request, room)
    try:
        count = person.memory_rebuild(
            room=room, seq_from=form.cleaned_data["seq_from"], seq_to=form.cleaned_data["seq_to"]
        )
    except person.MemoryRefused as exc:
        return _refused(request, room, exc)
    messages.success(
        request,
        f"Rebuilding {count} memor{'y' if count == 1 else 'ies'} in the background; "
        "yours are kept as they are."
        if count
        else "Nothing to rebuild there: the model's memories are current and yours are kept.",
    )
    return _back(request, room)
