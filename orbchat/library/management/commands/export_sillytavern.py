from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from orbchat.library import services
from orbchat.library.models import Character, Preset, WorldBook


class Command(BaseCommand):
    help = (
        "Export a card (.png, .json or .charx by the --out extension), a world book or a preset "
        "as SillyTavern files."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("kind", choices=["card", "worldbook", "preset"])
        parser.add_argument("id", type=int)
        parser.add_argument("--out", required=True, help="Where to write the file.")

    def handle(self, *args, kind: str, id: int, out: str, **options) -> None:
        path = Path(out)
        model = {"card": Character, "worldbook": WorldBook, "preset": Preset}[kind]
        try:
            obj = model.objects.get(pk=id)
        except model.DoesNotExist as exc:
            raise CommandError(f"No {kind} with id {id}.") from exc
        if kind == "card":
            fmt = path.suffix.lower().lstrip(".")
            if fmt not in services.CARD_FORMATS:
                raise CommandError("A card's --out must end in .png, .json or .charx.")
            data = services.character_export(character=obj, fmt=fmt)
        elif kind == "worldbook":
            data = services.worldbook_export(book=obj)
        else:
            data = services.preset_export(preset=obj)
        path.write_bytes(data)
        self.stdout.write(f"exported {kind} {obj.pk} {obj} to {path}")
