from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from orbchat.accounts.models import User
from orbchat.interop.errors import InteropError
from orbchat.library import services
from orbchat.library.models import Character
from rooms.chatfiles import ChatDuplicate, chat_import


class Command(BaseCommand):
    help = (
        "Import SillyTavern files (cards PNG/JSON, World Info books, presets) into a user's library; "
        "chats (.jsonl) go onto the character given with --character. A file whose card, book, "
        "preset or chat is in the library already is skipped, or imported as a copy with "
        "--on-duplicate copy."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("paths", nargs="+", help="Files to import.")
        parser.add_argument("--user", required=True, help="Username of the library's owner.")
        parser.add_argument("--character", type=int, help="Character id that .jsonl chats are imported onto.")
        parser.add_argument(
            "--on-duplicate",
            choices=["skip", "copy"],
            default="skip",
            help="What to do with a file already in the library: skip it (the default) or import a copy.",
        )

    def handle(
        self,
        *args,
        paths: list[str],
        user: str,
        character: int | None = None,
        on_duplicate: str = "skip",
        **options,
    ) -> None:
        try:
            owner = User.objects.get(username=user)
        except User.DoesNotExist as exc:
            raise CommandError(f"No user named {user!r}.") from exc
        refused = 0
        copy = on_duplicate == "copy"
        for raw in paths:
            path = Path(raw)
            try:
                content = path.read_bytes()
            except OSError as exc:
                self.stdout.write(f"refused {path}: {exc.strerror or exc}")
                refused += 1
                continue
            if path.suffix.lower() == ".jsonl":
                refused += self._import_chat(owner, path, content, character, copy=copy)
                continue
            try:
                imported = services.import_file(
                    owner=owner, filename=path.name, content=content, allow_duplicate=copy
                )
            except services.ImportDuplicate as exc:
                self.stdout.write(f"skipped {path}: {exc} ({exc.kind} {exc.existing.pk})")
                continue
            except services.ImportRefused as exc:
                reason = str(exc).removeprefix(f"{path.name}: ")
                self.stdout.write(f"refused {path}: {reason}")
                refused += 1
                continue
            self.stdout.write(f"imported {imported.kind} {imported.obj.pk} {imported.obj}")
        if refused:
            raise SystemExit(1)

    def _import_chat(
        self, owner: User, path: Path, content: bytes, character_id: int | None, *, copy: bool
    ) -> int:
        """Import one chat; return 1 when it was refused."""
        character = Character.objects.filter(pk=character_id, owner=owner).first() if character_id else None
        if character is None:
            self.stdout.write(
                f"refused {path}: a chat needs --character with the id of one of {owner}'s characters"
            )
            return 1
        try:
            room, problems = chat_import(
                host=owner, character=character, content=content, allow_duplicate=copy
            )
        except ChatDuplicate as exc:
            self.stdout.write(f"skipped {path}: {exc} (chat {exc.existing.pk})")
            return 0
        except InteropError as exc:
            self.stdout.write(f"refused {path}: {exc}")
            return 1
        self.stdout.write(f"imported chat {room.pk} {room.title}")
        for problem in problems:
            self.stderr.write(f"skipped in {path}: {problem}")
        return 0
