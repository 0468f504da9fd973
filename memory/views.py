from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from memory import prompts, selectors, tasks, turn_memory
from memory.facts import is_hot
from memory.forms import (
    FactAddForm,
    FactFilterForm,
    FactForm,
    MemoryAddForm,
    MemoryTextForm,
    MemoryTuningForm,
    PanelFilterForm,
    RebuildForm,
    RememberForm,
    SceneNoteForm,
)
from memory.models import Fact
from memory.services import facts as fact_services
from memory.services import person, runs, scene
from memory.services import tuning as tuning_services
from rooms import permissions


def tuning(request: HttpRequest) -> HttpResponse:
    """Memory tuning: the owner and admins shape how memory is written and recalled."""
    if not request.user.can_manage_users:
        raise PermissionDenied("Only the owner and admins change memory tuning.")
    reset = request.POST.get("reset")
    if reset:
        try:
            tuning_services.prompt_reset(kind=reset)
        except ValueError as exc:
            return HttpResponseBadRequest(str(exc))
        messages.success(request, f"{prompts.KINDS[reset].label}: the built-in prompt is back in use.")
        return redirect(reverse("memory:tuning") + "#prompts")
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


@require_GET
def context_used(request: HttpRequest, pk: int, variant_pk: int) -> HttpResponse:
    """What memory sent with one reply: the detail for the host, the counts for a member."""
    room = permissions.room_for_member(request.user, pk)
    used = selectors.context_used(room, request.user, variant_pk)
    return render(request, "memory/_context_used.html", {"room": room, "used": used})


# The Memory panel ------------------------------------------------------------------------------


def _back(request: HttpRequest, room, default: str = "memory:panel") -> HttpResponse:
    """Return to the page the action came from (same site only), else the panel."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return redirect(target)
    return redirect(default, pk=room.pk)


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
        "tab": "summaries",
        "nav": "home",
        **_scene_context(room, host),
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


# The scene note --------------------------------------------------------------------------------


def _scene_context(room, host: bool, form: SceneNoteForm | None = None) -> dict:
    found = selectors.scene_note_get(room)
    note, source = found if found else (None, "")
    if host and form is None:
        initial = {}
        if note is not None:
            initial = {
                "where": note.where,
                "who": ", ".join(note.who),
                "when": note.when,
                "open_threads": "\n".join(note.open_threads),
            }
        form = SceneNoteForm(initial=initial, auto_id="scene-%s")
    return {"scene": note, "scene_source": source, "scene_form": form if host else None}


def _refusal_to_form(form, exc: person.MemoryRefused) -> None:
    """Show a service's refusal next to the field it names (or above the form)."""
    form.add_error(exc.field if exc.field in form.fields else None, str(exc))


def scene_note(request: HttpRequest, pk: int) -> HttpResponse:
    """The host edits the room's scene note: where, who, when, what is open."""
    room = permissions.room_for_host(request.user, pk)
    form = None
    if request.method == "POST":
        permissions.ensure_writable(room)
        form = SceneNoteForm(request.POST, auto_id="scene-%s")
        if form.is_valid():
            try:
                note = scene.clean_note(**form.cleaned_data)
            except person.MemoryRefused as exc:
                _refusal_to_form(form, exc)
            else:
                scene.scene_note_edit(room=room, note=note)
                messages.success(request, "Scene note saved. It stands until a later message updates it.")
                return _back(request, room)
    context = {"room": room, "nav": "home", "scene_open": True, **_scene_context(room, True, form)}
    return render(request, "memory/scene.html", context)


# Facts ------------------------------------------------------------------------------------------


def _edit_form(fact: Fact, data=None) -> FactForm:
    initial = {
        "text": fact.text,
        "category": fact.category,
        "subjects": ", ".join(fact.subjects or ()),
        "confidence": fact.confidence,
    }
    return FactForm(data, initial=initial, auto_id=f"fact-{fact.pk}-%s")


def _facts_context(request: HttpRequest, room, who: str, *, add_form: FactAddForm | None = None) -> dict:
    host = who == permissions.HOST
    scopes = selectors.fact_scope_names(room) if host else []
    form = FactFilterForm(request.GET or None, scopes=scopes)
    chosen = {"q": "", "category": "", "status": "active", "heat": "all", "scope": ""}
    if form.is_valid():
        chosen.update({name: value for name, value in form.cleaned_data.items() if value})
    rows = selectors.fact_list(
        room,
        request.user,
        category=chosen["category"] or None,
        status=chosen["status"],
        heat=chosen["heat"],
        scope=chosen["scope"] or None,
        q=chosen["q"],
    )
    page = Paginator(rows, selectors.PAGE_SIZE).get_page(request.GET.get("page"))
    chains = selectors.fact_chains(page.object_list)
    items = [
        {
            "f": f,
            "hot": is_hot(f.heat),
            "chain": chains.get(f.pk, []),
            "form": _edit_form(f) if host else None,
        }
        for f in page.object_list
    ]
    if host and add_form is None:
        add_form = FactAddForm(auto_id="fact-add-%s", scopes=scopes)
    return {
        "room": room,
        "page": page,
        "items": items,
        "form": form,
        "chosen": chosen,
        "filtered": chosen != {"q": "", "category": "", "status": "active", "heat": "all", "scope": ""},
        "can_edit": host,
        "add_form": add_form,
        "stats": selectors.fact_stats(room, request.user),
        "memory_on": selectors.memory_on(room),
        "tab": "facts",
        "nav": "home",
        **_scene_context(room, host),
    }


@require_GET
def facts(request: HttpRequest, pk: int) -> HttpResponse:
    """A room's lasting facts, filtered by category, status, heat and scope; the host also edits them."""
    room, who = permissions.room_for_memory_reader(request.user, pk)
    return render(request, "memory/facts.html", _facts_context(request, room, who))


def _fact_or_404(room, viewer, fact_pk: int) -> Fact:
    fact = selectors.fact_get(room, viewer, fact_pk)
    if fact is None:
        raise Http404("That fact does not exist.")
    return fact


def _fact_page(
    request: HttpRequest, room, who: str, fact: Fact, form: FactForm | None = None
) -> HttpResponse:
    host = who == permissions.HOST
    context = {
        "room": room,
        "item": {
            "f": fact,
            "hot": is_hot(fact.heat),
            "chain": selectors.fact_chains([fact]).get(fact.pk, []),
            "form": form or (_edit_form(fact) if host else None),
        },
        "can_edit": host,
        "lines": selectors.fact_messages(room, fact),
        "nav": "home",
    }
    return render(request, "memory/fact.html", context)


@require_GET
def fact_detail(request: HttpRequest, pk: int, fact_pk: int) -> HttpResponse:
    """One fact with its correction chain and the messages it came from."""
    room, who = permissions.room_for_memory_reader(request.user, pk)
    return _fact_page(request, room, who, _fact_or_404(room, request.user, fact_pk))


def _host_fact(request: HttpRequest, pk: int, fact_pk: int):
    room = permissions.room_for_host(request.user, pk)
    permissions.ensure_writable(room)
    return room, _fact_or_404(room, request.user, fact_pk)


@require_POST
def fact_add(request: HttpRequest, pk: int) -> HttpResponse:
    room = permissions.room_for_host(request.user, pk)
    permissions.ensure_writable(room)
    form = FactAddForm(request.POST, auto_id="fact-add-%s", scopes=selectors.fact_scope_names(room))
    if form.is_valid():
        data = form.cleaned_data
        try:
            outcome = fact_services.fact_add_by_person(
                actor=request.user,
                room=room,
                text=data["text"],
                category=data["category"],
                subjects=data["subjects"],
                confidence=1.0 if data["confidence"] is None else data["confidence"],
                first_seq=data["first_seq"],
                last_seq=data["last_seq"],
                scope=data["scope"],
                pinned=data["pinned"],
            )
        except person.MemoryRefused as exc:
            _refusal_to_form(form, exc)
        else:
            if outcome.changed:
                messages.success(request, "Fact added. It is yours: the memory cycle never changes it.")
            else:
                messages.info(request, "That fact is already known.")
            if outcome.notice:
                messages.warning(request, outcome.notice)
            return _back(request, room, "memory:facts")
    return render(
        request, "memory/facts.html", _facts_context(request, room, permissions.HOST, add_form=form)
    )


@require_POST
def fact_edit(request: HttpRequest, pk: int, fact_pk: int) -> HttpResponse:
    room, fact = _host_fact(request, pk, fact_pk)
    form = _edit_form(fact, request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            outcome = fact_services.fact_edit_by_person(
                actor=request.user,
                fact=fact,
                text=data["text"],
                category=data["category"],
                subjects=data["subjects"],
                confidence=data["confidence"],
            )
        except person.MemoryRefused as exc:
            if exc.field not in form.fields:  # no longer editable (corrected or forgotten meanwhile)
                messages.error(request, str(exc))
                return _back(request, room, "memory:facts")
            _refusal_to_form(form, exc)
        else:
            messages.success(request, "The fact is now yours: the memory cycle never changes it.")
            if outcome.notice:
                messages.warning(request, outcome.notice)
            return _back(request, room, "memory:facts")
    return _fact_page(request, room, permissions.HOST, fact, form)


def _fact_action(request: HttpRequest, pk: int, fact_pk: int, change, done: str) -> HttpResponse:
    room, fact = _host_fact(request, pk, fact_pk)
    try:
        outcome = change(fact=fact, actor=request.user)
    except person.MemoryRefused as exc:
        messages.error(request, str(exc))
        return _back(request, room, "memory:facts")
    if outcome.changed:
        messages.success(request, done)
    else:
        messages.info(request, "Nothing to change: it already was.")
    if outcome.notice:
        messages.warning(request, outcome.notice)
    return _back(request, room, "memory:facts")


@require_POST
def fact_pin(request: HttpRequest, pk: int, fact_pk: int) -> HttpResponse:
    if request.POST.get("pinned") == "1":
        return _fact_action(request, pk, fact_pk, fact_services.fact_pin, "Fact pinned: it never cools.")
    return _fact_action(request, pk, fact_pk, fact_services.fact_unpin, "Fact unpinned.")


@require_POST
def fact_forget(request: HttpRequest, pk: int, fact_pk: int) -> HttpResponse:
    return _fact_action(
        request,
        pk,
        fact_pk,
        fact_services.fact_forget,
        "Fact forgotten: it is no longer recalled. Find it under Forgotten to restore it.",
    )


@require_POST
def fact_restore(request: HttpRequest, pk: int, fact_pk: int) -> HttpResponse:
    return _fact_action(
        request,
        pk,
        fact_pk,
        fact_services.fact_restore,
        "Fact restored: it is the active version again.",
    )
