"""Writes to a user's library. Imports validate everything before saving anything."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import DataError, IntegrityError, transaction

from orbchat.accounts.models import User
from orbchat.interop import cards, charx, kinds, png
from orbchat.interop import presets as st_presets
from orbchat.interop import worldbooks as st_worldbooks
from orbchat.interop.errors import InteropError, load_json
from orbchat.library import images, presets, starter
from orbchat.library.models import (
    Character,
    CharacterAsset,
    ContextTemplate,
    InstructTemplate,
    Persona,
    Preset,
    SystemPrompt,
    WorldBook,
    WorldEntry,
)

# A character stores every card field but the embedded lorebook, which becomes a WorldBook.
CARD_FIELDS = tuple(k for k in cards.CARD_KEYS if k != "character_book")
ENTRY_FIELDS = st_worldbooks.ENTRY_KEYS  # a stored entry has exactly the normalized entry's fields
SAMPLER_FIELDS = tuple(presets.DEFAULT_SAMPLERS)
# The book settings a card's embedded book carries (scan depth, budget, recursion).
BOOK_SETTINGS = tuple(ours for ours, _ in st_worldbooks.CARD_BOOK_SETTINGS.values())
CARD_FORMATS = ("png", "json", "charx")


class ImportRefused(Exception):
    """A file could not be imported; the message names the file and the problem."""


class ImportDuplicate(Exception):
    """The file holds what the library has already (`existing`); nothing was imported."""

    def __init__(self, *, kind: str, label: str, existing) -> None:
        super().__init__(f"“{existing}” is already in your library")
        self.kind, self.label, self.existing = kind, label, existing


def max_upload_bytes() -> int:
    return settings.MAX_UPLOAD_MB * 1024 * 1024


# --- Characters -------------------------------------------------------------------------------


def _apply_card(character: Character, card: dict) -> None:
    limit = Character._meta.get_field("name").max_length
    if len(card.get("name") or "") > limit:
        raise InteropError(f"the card's name is longer than {limit} characters")
    for name in CARD_FIELDS:
        if name in card:
            setattr(character, name, copy.deepcopy(card[name]))
    character.talkativeness = min(1.0, max(0.0, float(character.talkativeness)))


def _avatar_file(image: bytes) -> ContentFile:
    """Return the image as a PNG file: avatars are stored as PNG so cards can carry them."""
    return ContentFile(images.to_png(image), name="avatar.png")


def _assets_save(character: Character, assets: list[charx.Asset], avatar_path: str | None) -> None:
    for asset in assets:
        row = CharacterAsset(character=character, path=asset.path, is_avatar=asset.path == avatar_path)
        row.file.save(Path(asset.path).name or "asset", ContentFile(asset.content), save=False)
        row.save()


@transaction.atomic
def character_create(
    *,
    owner: User,
    card: dict,
    avatar: bytes | None = None,
    assets: list[charx.Asset] | None = None,
) -> Character:
    """Create a character from a normalized card; an embedded lorebook becomes an attached book.

    `assets` are the files of a CHARX card; the one its icon names is where `avatar` came from.
    """
    # Parse the lorebook before saving anything: a bad book refuses the whole card.
    book = st_worldbooks.parse_character_book(card["character_book"]) if card.get("character_book") else None
    character = Character(owner=owner)
    _apply_card(character, card)
    character.save()
    if book is not None:
        world_book = worldbook_create_from_data(
            owner=owner, data=book, fallback_name=f"{character.name}'s lorebook"
        )
        character.world_books.add(world_book)
    if avatar:
        character.avatar.save("avatar.png", _avatar_file(avatar), save=True)
    if assets:
        _assets_save(character, assets, charx.icon_path(card) if avatar else None)
    return character


@transaction.atomic
def character_update(*, character: Character, card: dict, avatar: bytes | None = None) -> Character:
    """Save the card's fields; a new avatar replaces the CHARX icon it was made from."""
    _apply_card(character, card)
    character.save()
    if avatar:
        character.avatar.save("avatar.png", _avatar_file(avatar), save=True)
        for asset in character.assets.filter(is_avatar=True):
            asset.file.delete(save=False)
            asset.delete()
    return character


@transaction.atomic
def character_set_favourite(*, character: Character, favourite: bool) -> Character:
    character.favourite = favourite
    character.save(update_fields=["favourite", "updated_at"])
    return character


@transaction.atomic
def character_duplicate(*, character: Character) -> Character:
    card = character_to_card(character, include_book=False)
    card["name"] = f"{character.name} (copy)"
    avatar = character.avatar.read() if character.avatar else None
    copy_ = character_create(owner=character.owner, card=card, avatar=avatar, assets=_assets_of(character))
    copy_.world_books.set(character.world_books.all())
    return copy_


@transaction.atomic
def character_delete(*, character: Character) -> None:
    if character.avatar:
        character.avatar.delete(save=False)
    for asset in character.assets.all():
        asset.file.delete(save=False)
    character.delete()


def _assets_of(character: Character) -> list[charx.Asset]:
    out = []
    for asset in character.assets.all():
        with asset.file.open("rb") as handle:
            out.append(charx.Asset(asset.path, handle.read()))
    return out


def character_to_card(character: Character, *, include_book: bool = True) -> dict:
    """Return the normalized card of a character (the shape orbchat.interop.cards reads)."""
    card = {name: copy.deepcopy(getattr(character, name)) for name in CARD_FIELDS}
    card["character_book"] = None
    if include_book:
        book = character.world_books.order_by("pk").first()
        if book is not None:
            card["character_book"] = st_worldbooks.export_character_book(worldbook_to_data(book))
    return card


def character_export(*, character: Character, fmt: str) -> bytes:
    """Return the character as a SillyTavern card in one of CARD_FORMATS."""
    card = character_to_card(character)
    if fmt == "json":
        return cards.export_card_json(card)
    avatar = character.avatar.read() if character.avatar else None
    if fmt == "png":
        return cards.export_card_png(card, avatar)
    if fmt == "charx":
        kept = character.assets.filter(is_avatar=True).exists()
        return charx.export_charx(card, assets=_assets_of(character), avatar=None if kept else avatar)
    raise ValueError(f"unknown card format {fmt!r}; use png, json or charx")


# --- Personas ---------------------------------------------------------------------------------


@transaction.atomic
def persona_create(
    *, owner: User, name: str, description: str = "", avatar: bytes | None = None, is_default: bool = False
) -> Persona:
    first = not owner.personas.exists()
    persona = Persona.objects.create(owner=owner, name=name, description=description)
    if avatar:
        persona.avatar.save("avatar.png", _avatar_file(avatar), save=True)
    if is_default or first:
        persona_set_default(persona=persona)
    return persona


@transaction.atomic
def persona_update(
    *, persona: Persona, name: str, description: str, avatar: bytes | None = None, world_books=None
) -> Persona:
    persona.name, persona.description = name, description
    persona.save()
    if world_books is not None:
        persona.world_books.set(world_books)
    if avatar:
        persona.avatar.save("avatar.png", _avatar_file(avatar), save=True)
    return persona


@transaction.atomic
def persona_set_default(*, persona: Persona) -> Persona:
    Persona.objects.filter(owner=persona.owner, is_default=True).exclude(pk=persona.pk).update(
        is_default=False
    )
    persona.is_default = True
    persona.save(update_fields=["is_default"])
    return persona


@transaction.atomic
def persona_delete(*, persona: Persona) -> None:
    was_default, owner = persona.is_default, persona.owner
    persona.delete()
    if was_default:
        successor = owner.personas.first()
        if successor:
            persona_set_default(persona=successor)


# --- Presets ----------------------------------------------------------------------------------


@transaction.atomic
def preset_create(
    *, owner: User, name: str, sections: list[dict] | None = None, source: dict | None = None, **fields
) -> Preset:
    """Create a preset; `source` (an import's record of its file) gets every sampler as saved here."""
    samplers = {**presets.DEFAULT_SAMPLERS, **{k: v for k, v in fields.items() if k in SAMPLER_FIELDS}}
    return Preset.objects.create(
        owner=owner,
        name=name,
        sections=presets.default_sections() if sections is None else sections,
        extra=fields.get("extra", {}),
        source={**source, "imported": copy.deepcopy(samplers)} if source else {},
        **samplers,
    )


@transaction.atomic
def preset_default_create(*, owner: User) -> Preset:
    return preset_create(owner=owner, name=presets.DEFAULT_PRESET_NAME)


@transaction.atomic
def preset_update(*, preset: Preset, **fields) -> Preset:
    for name, value in fields.items():
        if name in (*SAMPLER_FIELDS, "name", "sections", "memory_template"):
            setattr(preset, name, value)
    preset.save()
    return preset


@transaction.atomic
def preset_move_section(*, preset: Preset, identifier: str, offset: int) -> Preset:
    """Move a section up (-1) or down (+1) in the order."""
    sections = list(preset.sections)
    index = next((i for i, s in enumerate(sections) if s["identifier"] == identifier), None)
    if index is None:
        raise ValueError(f"the preset has no section {identifier!r}")
    target = max(0, min(len(sections) - 1, index + offset))
    sections.insert(target, sections.pop(index))
    preset.sections = sections
    preset.save(update_fields=["sections", "updated_at"])
    return preset


@transaction.atomic
def preset_duplicate(*, preset: Preset) -> Preset:
    fields = {name: getattr(preset, name) for name in SAMPLER_FIELDS}
    copy_ = preset_create(
        owner=preset.owner, name=f"{preset.name} (copy)", sections=copy.deepcopy(preset.sections), **fields
    )
    copy_.memory_template, copy_.extra = preset.memory_template, copy.deepcopy(preset.extra)
    copy_.source = copy.deepcopy(preset.source)  # exports as the original does
    copy_.save()
    return copy_


@transaction.atomic
def preset_delete(*, preset: Preset) -> None:
    preset.delete()


def preset_to_data(preset: Preset) -> dict:
    return {
        "name": preset.name,
        "sections": copy.deepcopy(preset.sections),
        "samplers": {name: getattr(preset, name) for name in SAMPLER_FIELDS},
        "extra": copy.deepcopy(preset.extra),
        "source": copy.deepcopy(preset.source),
    }


def preset_export(*, preset: Preset) -> bytes:
    """Return the preset as a SillyTavern file, in the format it was imported from."""
    data = st_presets.export_preset(preset_to_data(preset))
    return json.dumps(data, indent=2, ensure_ascii=False).encode()


# --- World books ------------------------------------------------------------------------------


def _entry(book: WorldBook, data: dict) -> WorldEntry:
    return WorldEntry(book=book, **{name: data[name] for name in ENTRY_FIELDS if name in data})


@transaction.atomic
def worldbook_create_from_data(*, owner: User, data: dict, fallback_name: str = "World book") -> WorldBook:
    """Create a book and its entries from the normalized shape of orbchat.interop.worldbooks."""
    book = WorldBook.objects.create(
        owner=owner,
        name=(data.get("name") or fallback_name)[:200],
        extra=data.get("extra") or {},
        **{name: data["settings"][name] for name in BOOK_SETTINGS if name in (data.get("settings") or {})},
    )
    WorldEntry.objects.bulk_create(
        [_entry(book, entry) for entry in data.get("entries", [])], batch_size=1000
    )
    return book


@transaction.atomic
def worldbook_create(*, owner: User, name: str, **settings_) -> WorldBook:
    return WorldBook.objects.create(owner=owner, name=name, **settings_)


@transaction.atomic
def worldbook_update(*, book: WorldBook, **fields) -> WorldBook:
    for name, value in fields.items():
        setattr(book, name, value)
    book.save()
    return book


@transaction.atomic
def worldbook_delete(*, book: WorldBook) -> None:
    book.delete()


def worldbook_to_data(book: WorldBook) -> dict:
    entries = [{name: copy.deepcopy(getattr(e, name)) for name in ENTRY_FIELDS} for e in book.entries.all()]
    return {
        "name": book.name,
        "entries": entries,
        "extra": copy.deepcopy(book.extra),
        "settings": {name: getattr(book, name) for name in BOOK_SETTINGS},
    }


def worldbook_export(*, book: WorldBook) -> bytes:
    data = st_worldbooks.export_world_info(worldbook_to_data(book))
    return json.dumps(data, indent=2, ensure_ascii=False).encode()


@transaction.atomic
def entry_save(*, book: WorldBook, data: dict, entry: WorldEntry | None = None) -> WorldEntry:
    """Create an entry (next free uid) or update one."""
    if entry is None:
        last = book.entries.order_by("-uid").values_list("uid", flat=True).first()
        entry = WorldEntry(book=book, uid=0 if last is None else last + 1)
    for name, value in data.items():
        if name in ENTRY_FIELDS and name != "uid":
            setattr(entry, name, value)
    entry.save()
    return entry


@transaction.atomic
def entry_delete(*, entry: WorldEntry) -> None:
    entry.delete()


# --- Instruct templates, context templates and system prompts ---------------------------------

TEMPLATE_MODELS: dict[str, type[InstructTemplate | ContextTemplate | SystemPrompt]] = {
    "instruct": InstructTemplate,
    "context": ContextTemplate,
    "system_prompt": SystemPrompt,
}


@transaction.atomic
def template_create(
    *, owner: User, kind: str, data: dict, fallback_name: str
) -> InstructTemplate | ContextTemplate | SystemPrompt:
    """Store a SillyTavern instruct template, context template or system prompt exactly as it came."""
    name = data.get("name") if isinstance(data.get("name"), str) and data["name"].strip() else fallback_name
    return TEMPLATE_MODELS[kind].objects.create(owner=owner, name=name[:200], data=copy.deepcopy(data))


@transaction.atomic
def template_delete(*, template: InstructTemplate | ContextTemplate | SystemPrompt) -> None:
    template.delete()


def template_export(*, template: InstructTemplate | ContextTemplate | SystemPrompt) -> bytes:
    return json.dumps(template.data, indent=4, ensure_ascii=False).encode()


# --- Import of any SillyTavern file -----------------------------------------------------------

WORLD_BOOK_PARSERS = {
    "sillytavern": st_worldbooks.parse_world_info,
    "lorebook_v3": st_worldbooks.parse_lorebook_v3,
    "novelai": st_worldbooks.parse_novelai_lorebook,
    "agnai": st_worldbooks.parse_agnai_memory_book,
    "risu": st_worldbooks.parse_risu_lorebook,
}
CHAT_REFUSAL = "a SillyTavern chat: import chats onto a character from the Chats page"


@dataclass
class Imported:
    kind: str  # card, worldbook, preset, instruct, context, system_prompt
    label: str  # what the file was, in words ("a NovelAI lorebook")
    obj: Character | WorldBook | Preset | InstructTemplate | ContextTemplate | SystemPrompt
    unmapped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the import added or changed, in words


def detect_kind(filename: str, content: bytes) -> tuple[kinds.Kind, object]:
    """Return (kind, parsed) for a file; raise InteropError saying what it is when it cannot be imported."""
    suffix = Path(filename).suffix.lower()
    if png.is_png(content):
        card, avatar = cards.parse_card_png(content)
        return kinds.CARD, (card, avatar, [])
    if suffix == ".charx" or charx.is_zip(content):
        return kinds.CHARX, charx.parse_charx(content, max_bytes=max_upload_bytes())
    if suffix in (".png", ".webp", ".jpg", ".jpeg"):
        raise InteropError("not a PNG image")
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InteropError("the file is neither a PNG image nor UTF-8 JSON") from exc
    if suffix == ".jsonl" or kinds.classify_jsonl(text):
        raise InteropError(CHAT_REFUSAL)
    data = load_json(text, "the file", max_bytes=max_upload_bytes())
    kind = kinds.classify(data)
    if kind is None:
        raise InteropError(f"not a file OrbChat can import: {kinds.describe_unknown(data)}")
    stem = Path(filename).stem
    if kind.kind == "card":
        return kind, (cards.parse_card_json(data), None, [])
    if kind.kind == "worldbook":
        return kind, WORLD_BOOK_PARSERS[kind.format](data, name=stem)
    if kind.kind == "chat_preset":
        return kind, st_presets.parse_chat_completion_preset(data, name=stem)
    if kind.kind == "text_preset":
        return kind, st_presets.parse_text_completion_preset(data, name=stem, dialect=kind.format)
    if kind.kind in TEMPLATE_MODELS:
        return kind, data
    if kind.kind == "chat":
        raise InteropError(CHAT_REFUSAL)
    raise InteropError(f"this looks like {kind.label}, which OrbChat does not import")


def import_file(*, owner: User, filename: str, content: bytes, allow_duplicate: bool = True) -> Imported:
    """Import one SillyTavern file of any kind; raise ImportRefused naming the file and problem.

    The file is saved whole or not at all. With `allow_duplicate` False, a card, world book or
    preset the library holds already (`library_duplicate`) is not imported: ImportDuplicate
    names the one it matches.
    """
    limit = max_upload_bytes()
    if len(content) > limit:
        raise ImportRefused(f"{filename}: the file is larger than {settings.MAX_UPLOAD_MB} MB")
    try:
        kind, parsed = detect_kind(filename, content)
        if not allow_duplicate:
            existing = library_duplicate(owner=owner, filename=filename, kind=kind, parsed=parsed)
            if existing is not None:
                kind_name = "preset" if kind.kind in ("chat_preset", "text_preset") else kind.kind
                raise ImportDuplicate(kind=kind_name, label=kind.label, existing=existing)
        return _import_parsed(owner=owner, filename=filename, kind=kind, parsed=parsed)
    except (InteropError, images.NotAnImage) as exc:  # e.g. a broken embedded lorebook or image
        raise ImportRefused(f"{filename}: {exc}") from exc
    except (OverflowError, DataError, IntegrityError) as exc:
        raise ImportRefused(
            f"{filename}: a value in the file is out of the range that can be stored"
        ) from exc
    except ValueError as exc:  # PostgreSQL's driver refuses text holding NUL characters
        raise ImportRefused(f"{filename}: a value in the file cannot be stored ({exc})") from exc


def _preset_notes(sections: list[dict]) -> list[str]:
    places = st_presets.ADDED_PLACES
    return [
        f"added {section['name']} ({places[section['marker']]}): the file has no place for it"
        for section in sections
        if section.get("added") and section.get("marker") in st_presets.ADDED_PLACES
    ]


# What makes an imported card the same as one in the library: its name and every text a person
# wrote on it. The picture, tags and settings are left out: a card saved again with a new image
# or talkativeness is still the same character.
CARD_SAME = (*cards.TEXT_FIELDS, "alternate_greetings")


def _preset_parts(parsed) -> tuple[str, list[dict], dict]:
    """The name, sections and samplers an imported preset is saved with."""
    data, _ = parsed
    return data.get("name") or "", data["sections"] or presets.default_sections(), data["samplers"]


def library_duplicate(*, owner: User, filename: str, kind: kinds.Kind, parsed):
    """The card, world book or preset of `owner`'s library that the parsed file would duplicate,
    or None.

    The same card has the same name and texts (CARD_SAME); the same world book the same name
    and entries (keys and content, in order); the same preset the same name, prompt sections
    and samplers. Other kinds of file are never taken as duplicates.
    """
    stem = Path(filename).stem
    if kind.kind == "card":
        card = parsed[0]
        for character in Character.objects.filter(owner=owner, name=card.get("name") or ""):
            if all(getattr(character, name) == card.get(name, "") for name in CARD_SAME if name in card):
                return character
        return None
    if kind.kind == "worldbook":
        name = (parsed.get("name") or stem)[:200]
        wanted = [(list(e.get("keys") or []), e.get("content") or "") for e in parsed.get("entries", [])]
        for book in WorldBook.objects.filter(owner=owner, name=name):
            have = [(list(e.keys or []), e.content) for e in book.entries.order_by("pk")]
            if have == wanted:
                return book
        return None
    if kind.kind in ("chat_preset", "text_preset"):
        name, sections, samplers = _preset_parts(parsed)
        for preset in Preset.objects.filter(owner=owner, name=name or stem):
            same_samplers = all(getattr(preset, k) == v for k, v in samplers.items() if k in SAMPLER_FIELDS)
            if same_samplers and preset.sections == sections:
                return preset
        return None
    return None


@transaction.atomic
def _import_parsed(*, owner: User, filename: str, kind: kinds.Kind, parsed) -> Imported:
    stem = Path(filename).stem
    if kind.kind == "card":
        card, avatar, assets = parsed
        character = character_create(owner=owner, card=card, avatar=avatar, assets=assets)
        return Imported("card", kind.label, character)
    if kind.kind == "worldbook":
        book = worldbook_create_from_data(owner=owner, data=parsed, fallback_name=stem)
        return Imported("worldbook", kind.label, book)
    if kind.kind in TEMPLATE_MODELS:
        template = template_create(owner=owner, kind=kind.kind, data=parsed, fallback_name=stem)
        return Imported(kind.kind, kind.label, template)
    data, unmapped = parsed
    fields = {**data["samplers"], "extra": data.get("extra", {}), "source": data.get("source") or {}}
    if data["sections"]:
        sections = data["sections"]
        notes = _preset_notes(sections)
    else:
        sections = presets.default_sections()
        notes = ["the file holds samplers only: the prompt sections are OrbChat's default"]
    preset = preset_create(owner=owner, name=data.get("name") or stem, sections=sections, **fields)
    return Imported("preset", kind.label, preset, unmapped, notes)


# --- The starter pack -------------------------------------------------------------------------


@transaction.atomic
def starter_pack_install(*, owner: User) -> Character:
    """Give a new account a ready character, its world book, a persona and the default preset.

    The persona is named after the account, so people sharing a chat post under their own names.
    """
    character = character_create(owner=owner, card=starter.CHARACTER, avatar=starter.AVATAR_PATH.read_bytes())
    book = worldbook_create_from_data(owner=owner, data=starter.WORLD_BOOK)
    character.world_books.add(book)
    persona_create(owner=owner, name=owner.username, is_default=True, **starter.PERSONA)
    preset_default_create(owner=owner)
    return character
