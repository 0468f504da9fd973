from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from orbchat.accounts.models import User
from orbchat.library import services


class Command(BaseCommand):
    help = "Import SillyTavern files (cards PNG/JSON, World Info books, presets) into a user's library."

    def add_arguments(self, parser) -> None:
        parser.add_argument("paths", nargs="+", help="Files to import.")
        parser.add_argument("--user", required=True, help="Username of the library's owner.")

    def handle(self, *args, paths: list[str], user: str, **options) -> None:
        try:
            owner = User.objects.get(username=user)
        except User.DoesNotExist as exc:
            raise CommandError(f"No user named {user!r}.") from exc
        refused = 0
        for raw in paths:
            path = Path(raw)
            try:
                content = path.read_bytes()
            except OSError as exc:
                self.stdout.write(f"refused {path}: {exc.strerror or exc}")
                refused += 1
                continue
            try:
                imported = services.import_file(owner=owner, filename=path.name, content=content)
            except services.ImportRefused as exc:
                reason = str(exc).removeprefix(f"{path.name}: ")
                self.stdout.write(f"refused {path}: {reason}")
                refused += 1
                continue
            self.stdout.write(f"imported {imported.kind} {imported.obj.pk} {imported.obj}")
        if refused:
            raise SystemExit(1)
