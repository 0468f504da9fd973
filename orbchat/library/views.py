from __future__ import annotations

import mimetypes

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from orbchat.library import pending, selectors, services, worldtest
from orbchat.library.forms import (
    AddSectionForm,
    CharacterForm,
    EntryForm,
    PersonaForm,
    PresetForm,
    SectionForm,
    TryForm,
    UploadForm,
    WorldBookForm,
)
from orbchat.library.models import Character, Persona, Preset, WorldBook, WorldEntry
from orbchat.library.presets import marker, section
from orbchat.prompting import macros
from rooms import selectors as room_selectors

# --- Characters -------------------------------------------------------------------------------


def accepted_languages(request: HttpRequest) -> list[str]:
    """The languages the browser asks for (Accept-Language), most wanted first."""
    ranked = []
    for index, item in enumerate(request.headers.get("Accept-Language", "").split(",")[:20]):
        code, _, params = item.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                continue
        if code and code != "*" and quality > 0:
            ranked.append((-quality, index, code.strip()))
    return [code for _, _, code in sorted(ranked)]


def character_list(request: HttpRequest) -> HttpResponse:
    q, tag = request.GET.get("q", "").strip(), request.GET.get("tag", "").strip()
    favourites = request.GET.get("favourites") == "1"
    characters = list(selectors.character_list(user=request.user, q=q, tag=tag, favourites=favourites))
    latest = room_selectors.solo_chats_latest(user=request.user, character_ids=[c.pk for c in characters])
    context = {
        "characters": characters,
        "tiles": [(character, latest.get(character.pk)) for character in characters],
        "tags": selectors.character_tags(user=request.user),
        "q": q,
        "tag": tag,
        "favourites": favourites,
        "upload_form": UploadForm(),
        "nav": "characters",
    }
    return render(request, "library/character_list.html", context)


def character_create(request: HttpRequest) -> HttpResponse:
    form = CharacterForm(request.POST or None, request.FILES or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        character = services.character_create(
            owner=request.user, card=form.card(), avatar=form.cleaned_data["avatar"]
        )
        character.world_books.set(form.cleaned_data["world_books"])
        messages.success(request, f"{character.name} created.")
        return redirect("library:character", pk=character.pk)
    return render(request, "library/character_form.html", {"form": form, "nav": "characters"})


def character_detail(request: HttpRequest, pk: int) -> HttpResponse:
    character = selectors.owned(Character, user=request.user, pk=pk)
    initial = {
        name: getattr(character, name) for name in services.CARD_FIELDS if name not in ("extensions", "extra")
    }
    initial["world_books"] = character.world_books.all()
    form = CharacterForm(request.POST or None, request.FILES or None, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        services.character_update(character=character, card=form.card(), avatar=form.cleaned_data["avatar"])
        character.world_books.set(form.cleaned_data["world_books"])
        messages.success(request, f"{character.name} saved.")
        return redirect("library:character", pk=character.pk)
    persona = selectors.persona_default(user=request.user)
    latest = room_selectors.solo_chats_latest(user=request.user, character_ids=[character.pk])
    macro_context = macros.MacroContext(
        char=character.macro_name,
        user=persona.name if persona else request.user.username,
        persona=persona.description if persona else "",
        description=character.description,
        scenario=character.scenario,
        personality=character.personality,
        chat_id=f"preview-{character.pk}",
    )
    context = {
        "character": character,
        "form": form,
        "greeting": macros.substitute(character.first_mes, macro_context),
        "creator_notes": character.creator_notes_for(accepted_languages(request)),
        "books": character.world_books.all(),
        "continue_chat": latest.get(character.pk),
        "nav": "characters",
    }
    return render(request, "library/character_form.html", context)


@require_POST
def character_favourite(request: HttpRequest, pk: int) -> HttpResponse:
    character = selectors.owned(Character, user=request.user, pk=pk)
    services.character_set_favourite(character=character, favourite=not character.favourite)
    if request.htmx:
        return render(request, "library/_favourite.html", {"character": character})
    return redirect("library:characters")


@require_POST
def character_duplicate(request: HttpRequest, pk: int) -> HttpResponse:
    character = selectors.owned(Character, user=request.user, pk=pk)
    duplicate = services.character_duplicate(character=character)
    messages.success(request, f"Duplicated as {duplicate.name}.")
    return redirect("library:character", pk=duplicate.pk)


def character_delete(request: HttpRequest, pk: int) -> HttpResponse:
    character = selectors.owned(Character, user=request.user, pk=pk)
    if request.method == "POST":
        services.character_delete(character=character)
        messages.success(request, f"{character.name} deleted.")
        return redirect("library:characters")
    return render(
        request,
        "library/confirm_delete.html",
        {"object": character, "what": "character", "nav": "characters"},
    )


def character_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    character = selectors.owned(Character, user=request.user, pk=pk)
    if fmt not in services.CARD_FORMATS:
        raise Http404("No such export format: a card exports as .png, .json or .charx.")
    data = services.character_export(character=character, fmt=fmt)
    content_type = {"png": "image/png", "json": "application/json", "charx": "application/zip"}[fmt]
    response = HttpResponse(data, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{_safe_filename(character.name)}.{fmt}"'
    return response


def character_avatar(request: HttpRequest, pk: int) -> HttpResponse:
    character = selectors.owned(Character, user=request.user, pk=pk)
    return _file_response(character.avatar)


# --- Import -----------------------------------------------------------------------------------


def _imported_row(upload_name: str, imported: services.Imported) -> dict:
    return {
        "file": upload_name,
        "ok": True,
        "label": imported.label,
        "name": str(imported.obj),
        "url": _import_url(imported),
        "unmapped": imported.unmapped,
        "notes": imported.notes,
    }


def import_files(request: HttpRequest) -> HttpResponse:
    """Take any number of SillyTavern files; report each as imported or refused, and ask about
    each that the library holds already (the upload waits in `pending` for the answer)."""
    form = UploadForm(request.POST or None, request.FILES or None)
    results = []
    if request.method == "POST" and form.is_valid():
        for upload in form.cleaned_data["files"]:
            content = upload.read()
            try:
                imported = services.import_file(
                    owner=request.user, filename=upload.name, content=content, allow_duplicate=False
                )
            except services.ImportRefused as exc:
                results.append({"file": upload.name, "ok": False, "reason": str(exc)})
            except services.ImportDuplicate as exc:
                token = pending.hold(user=request.user, filename=upload.name, content=content)
                results.append(
                    {
                        "file": upload.name,
                        "duplicate": True,
                        "name": str(exc.existing),
                        "url": _import_url(services.Imported(exc.kind, exc.label, exc.existing)),
                        "token": token,
                    }
                )
            else:
                results.append(_imported_row(upload.name, imported))
    return render(request, "library/import.html", {"form": form, "results": results, "nav": "import"})


@require_POST
def import_resolve(request: HttpRequest) -> HttpResponse:
    """Answer the duplicate question for a held upload: import it as a copy, or skip it."""
    held = pending.take(user=request.user, token=request.POST.get("token", ""))
    if held is None:
        messages.error(request, "That upload is no longer waiting: choose the file again.")
        return redirect("library:import")
    results = []
    if request.POST.get("action") == "copy":
        try:
            imported = services.import_file(owner=request.user, filename=held.filename, content=held.content)
        except services.ImportRefused as exc:
            results.append({"file": held.filename, "ok": False, "reason": str(exc)})
        else:
            results.append(_imported_row(held.filename, imported))
    else:
        results.append({"file": held.filename, "skipped": True})
    return render(request, "library/import.html", {"form": UploadForm(), "results": results, "nav": "import"})


def _import_url(imported: services.Imported) -> str:
    if imported.kind in services.TEMPLATE_MODELS:
        return reverse("library:templates") + f"#{imported.kind}-{imported.obj.pk}"
    name = {"card": "library:character", "worldbook": "library:worldbook", "preset": "library:preset"}[
        imported.kind
    ]
    return reverse(name, kwargs={"pk": imported.obj.pk})


# --- Instruct templates, context templates and system prompts ----------------------------------


def template_list(request: HttpRequest) -> HttpResponse:
    context = {"groups": selectors.template_groups(user=request.user), "nav": "presets"}
    return render(request, "library/template_list.html", context)


def _template(request: HttpRequest, kind: str, pk: int):
    if kind not in services.TEMPLATE_MODELS:
        raise Http404("No such kind of template.")
    return selectors.owned(services.TEMPLATE_MODELS[kind], user=request.user, pk=pk)


def template_export(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    template = _template(request, kind, pk)
    response = HttpResponse(services.template_export(template=template), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{_safe_filename(template.name)}.json"'
    return response


def template_delete(request: HttpRequest, kind: str, pk: int) -> HttpResponse:
    template = _template(request, kind, pk)
    if request.method == "POST":
        services.template_delete(template=template)
        messages.success(request, f"{template.name} deleted.")
        return redirect("library:templates")
    context = {"object": template, "what": template._meta.verbose_name, "nav": "presets"}
    return render(request, "library/confirm_delete.html", context)


# --- Personas ---------------------------------------------------------------------------------


def persona_list(request: HttpRequest) -> HttpResponse:
    form = PersonaForm(request.POST or None, request.FILES or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        persona = services.persona_create(
            owner=request.user,
            name=form.cleaned_data["name"],
            description=form.cleaned_data["description"],
            avatar=form.cleaned_data["avatar"],
        )
        persona.world_books.set(form.cleaned_data["world_books"])
        messages.success(request, f"Persona {persona.name} created.")
        return redirect("library:personas")
    context = {"personas": selectors.persona_list(user=request.user), "form": form, "nav": "personas"}
    return render(request, "library/persona_list.html", context)


def persona_detail(request: HttpRequest, pk: int) -> HttpResponse:
    persona = selectors.owned(Persona, user=request.user, pk=pk)
    form = PersonaForm(request.POST or None, request.FILES or None, instance=persona, user=request.user)
    if request.method == "POST" and form.is_valid():
        services.persona_update(
            persona=persona,
            name=form.cleaned_data["name"],
            description=form.cleaned_data["description"],
            avatar=form.cleaned_data["avatar"],
            world_books=form.cleaned_data["world_books"],
        )
        messages.success(request, f"Persona {persona.name} saved.")
        return redirect("library:personas")
    return render(request, "library/persona_form.html", {"persona": persona, "form": form, "nav": "personas"})


@require_POST
def persona_default(request: HttpRequest, pk: int) -> HttpResponse:
    persona = selectors.owned(Persona, user=request.user, pk=pk)
    services.persona_set_default(persona=persona)
    messages.success(request, f"{persona.name} is now your default persona.")
    return redirect("library:personas")


def persona_delete(request: HttpRequest, pk: int) -> HttpResponse:
    persona = selectors.owned(Persona, user=request.user, pk=pk)
    if request.method == "POST":
        services.persona_delete(persona=persona)
        messages.success(request, f"Persona {persona.name} deleted.")
        return redirect("library:personas")
    return render(
        request, "library/confirm_delete.html", {"object": persona, "what": "persona", "nav": "personas"}
    )


def persona_avatar(request: HttpRequest, pk: int) -> HttpResponse:
    return _file_response(selectors.owned(Persona, user=request.user, pk=pk).avatar)


# --- Presets ----------------------------------------------------------------------------------


def preset_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        preset = services.preset_default_create(owner=request.user)
        return redirect("library:preset", pk=preset.pk)
    context = {
        "presets": selectors.preset_list(user=request.user),
        "upload_form": UploadForm(),
        "nav": "presets",
    }
    return render(request, "library/preset_list.html", context)


def preset_detail(request: HttpRequest, pk: int) -> HttpResponse:
    preset = selectors.owned(Preset, user=request.user, pk=pk)
    initial = {name: getattr(preset, name) for name in (*services.SAMPLER_FIELDS, "name", "memory_template")}
    form = PresetForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        services.preset_update(preset=preset, **form.cleaned_data)
        messages.success(request, f"Preset {preset.name} saved.")
        return redirect("library:preset", pk=preset.pk)
    context = {"preset": preset, "form": form, "add_form": AddSectionForm(), "nav": "presets"}
    return render(request, "library/preset_form.html", context)


def _section_index(preset: Preset, identifier: str) -> int:
    for index, item in enumerate(preset.sections):
        if item["identifier"] == identifier:
            return index
    raise Http404("No such section.")


@require_POST
def preset_section_move(request: HttpRequest, pk: int, identifier: str) -> HttpResponse:
    preset = selectors.owned(Preset, user=request.user, pk=pk)
    _section_index(preset, identifier)
    offset = -1 if request.POST.get("direction") == "up" else 1
    services.preset_move_section(preset=preset, identifier=identifier, offset=offset)
    if request.htmx:
        return render(request, "library/_sections.html", {"preset": preset})
    return redirect(reverse("library:preset", kwargs={"pk": pk}) + "#sections")


def preset_section_edit(request: HttpRequest, pk: int, identifier: str) -> HttpResponse:
    preset = selectors.owned(Preset, user=request.user, pk=pk)
    index = _section_index(preset, identifier)
    current = preset.sections[index]
    form = SectionForm(request.POST or None, initial=current, is_marker=current["kind"] == "marker")
    if request.method == "POST" and form.is_valid():
        sections = list(preset.sections)
        sections[index] = {**current, **form.cleaned_data}
        if current["kind"] == "marker":
            sections[index]["text"] = current["text"]
        services.preset_update(preset=preset, sections=sections)
        messages.success(request, f"Section {form.cleaned_data['name']} saved.")
        return redirect(reverse("library:preset", kwargs={"pk": pk}) + "#sections")
    context = {"preset": preset, "section": current, "form": form, "nav": "presets"}
    return render(request, "library/section_form.html", context)


@require_POST
def preset_section_add(request: HttpRequest, pk: int) -> HttpResponse:
    preset = selectors.owned(Preset, user=request.user, pk=pk)
    form = AddSectionForm(request.POST)
    if form.is_valid():
        kind = form.cleaned_data["kind"]
        if kind.startswith("marker:"):
            name = kind.removeprefix("marker:")
            new = marker(name, identifier=f"{name}-{len(preset.sections)}")
        else:
            new = section(kind="literal", name="New section")
        services.preset_update(preset=preset, sections=[*preset.sections, new])
        return redirect("library:preset_section", pk=pk, identifier=new["identifier"])
    return redirect("library:preset", pk=pk)


@require_POST
def preset_section_delete(request: HttpRequest, pk: int, identifier: str) -> HttpResponse:
    preset = selectors.owned(Preset, user=request.user, pk=pk)
    _section_index(preset, identifier)
    services.preset_update(
        preset=preset, sections=[s for s in preset.sections if s["identifier"] != identifier]
    )
    return redirect(reverse("library:preset", kwargs={"pk": pk}) + "#sections")


@require_POST
def preset_duplicate(request: HttpRequest, pk: int) -> HttpResponse:
    preset = services.preset_duplicate(preset=selectors.owned(Preset, user=request.user, pk=pk))
    return redirect("library:preset", pk=preset.pk)


def preset_delete(request: HttpRequest, pk: int) -> HttpResponse:
    preset = selectors.owned(Preset, user=request.user, pk=pk)
    if request.method == "POST":
        services.preset_delete(preset=preset)
        messages.success(request, f"Preset {preset.name} deleted.")
        return redirect("library:presets")
    return render(
        request, "library/confirm_delete.html", {"object": preset, "what": "preset", "nav": "presets"}
    )


def preset_export(request: HttpRequest, pk: int) -> HttpResponse:
    preset = selectors.owned(Preset, user=request.user, pk=pk)
    response = HttpResponse(services.preset_export(preset=preset), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{_safe_filename(preset.name)}.json"'
    return response


# --- World books ------------------------------------------------------------------------------


def worldbook_list(request: HttpRequest) -> HttpResponse:
    form = WorldBookForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        book = services.worldbook_create(owner=request.user, **form.cleaned_data)
        return redirect("library:worldbook", pk=book.pk)
    context = {
        "books": selectors.worldbook_list(user=request.user),
        "form": form,
        "upload_form": UploadForm(),
        "nav": "worldbooks",
    }
    return render(request, "library/worldbook_list.html", context)


def worldbook_detail(request: HttpRequest, pk: int) -> HttpResponse:
    book = selectors.owned(WorldBook, user=request.user, pk=pk)
    form = WorldBookForm(request.POST or None, instance=book)
    if request.method == "POST" and form.is_valid():
        services.worldbook_update(book=book, **form.cleaned_data)
        messages.success(request, f"{book.name} saved.")
        return redirect("library:worldbook", pk=book.pk)
    q = request.GET.get("q", "").strip()
    page = Paginator(selectors.entry_list(book=book, q=q), 50).get_page(request.GET.get("page"))
    context = {"book": book, "form": form, "page": page, "q": q, "try_form": TryForm(), "nav": "worldbooks"}
    return render(request, "library/worldbook_form.html", context)


def entry_edit(request: HttpRequest, pk: int, entry_pk: int | None = None) -> HttpResponse:
    book = selectors.owned(WorldBook, user=request.user, pk=pk)
    entry = None
    if entry_pk is not None:
        entry = WorldEntry.objects.filter(book=book, pk=entry_pk).first()
        if entry is None:
            raise Http404("No such entry.")
    form = EntryForm(request.POST or None, instance=entry)
    if request.method == "POST" and form.is_valid():
        entry = services.entry_save(book=book, data=form.cleaned_data, entry=entry)
        messages.success(request, f"Entry “{entry}” saved.")
        return redirect("library:worldbook", pk=book.pk)
    context = {"book": book, "entry": entry, "form": form, "nav": "worldbooks"}
    return render(request, "library/entry_form.html", context)


@require_POST
def entry_delete(request: HttpRequest, pk: int, entry_pk: int) -> HttpResponse:
    book = selectors.owned(WorldBook, user=request.user, pk=pk)
    entry = WorldEntry.objects.filter(book=book, pk=entry_pk).first()
    if entry is None:
        raise Http404("No such entry.")
    services.entry_delete(entry=entry)
    messages.success(request, "Entry deleted.")
    return redirect("library:worldbook", pk=book.pk)


@require_POST
def worldbook_try(request: HttpRequest, pk: int) -> HttpResponse:
    """Show which entries the typed messages would activate, and why."""
    book = selectors.owned(WorldBook, user=request.user, pk=pk)
    form = TryForm(request.POST)
    result = worldtest.try_book(book=book, text=form.data.get("messages", "")) if form.is_valid() else None
    context = {"book": book, "try_form": form, "result": result}
    return render(request, "library/_try_result.html", context)


def worldbook_delete(request: HttpRequest, pk: int) -> HttpResponse:
    book = selectors.owned(WorldBook, user=request.user, pk=pk)
    if request.method == "POST":
        services.worldbook_delete(book=book)
        messages.success(request, f"{book.name} deleted.")
        return redirect("library:worldbooks")
    return render(
        request, "library/confirm_delete.html", {"object": book, "what": "world book", "nav": "worldbooks"}
    )


def worldbook_export(request: HttpRequest, pk: int) -> HttpResponse:
    book = selectors.owned(WorldBook, user=request.user, pk=pk)
    response = HttpResponse(services.worldbook_export(book=book), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{_safe_filename(book.name)}.json"'
    return response


# --- Helpers ----------------------------------------------------------------------------------


def _safe_filename(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in " -_" else "_" for c in name).strip()
    return cleaned or "export"


def _file_response(field) -> HttpResponse:
    if not field:
        raise Http404("No image.")
    content_type = mimetypes.guess_type(field.name)[0] or "image/png"
    response = FileResponse(field.open("rb"), content_type=content_type)
    response["Cache-Control"] = "private, max-age=60"
    response["X-Content-Type-Options"] = "nosniff"
    return response
