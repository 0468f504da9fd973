"""Build memory for existing chats: `python manage.py memory_backfill (--room ID | --all)`."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from memory.services import catch_up as passes
from memory.services.summaries import ProviderTrouble
from rooms.models import Room


def bar(done: int, total: int, width: int = 30) -> str:
    filled = int(width * done / total) if total else width
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"


class Command(BaseCommand):
    help = "Summarise and index the history of chats (resumable: run it again to continue)."

    def add_arguments(self, parser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--room", type=int, help="One room's id.")
        which.add_argument("--all", action="store_true", help="Every room with memory on.")

    def handle(self, *args, **options) -> None:
        rooms = Room.objects.all() if options["all"] else Room.objects.filter(pk=options["room"])
        if not rooms.exists():
            raise CommandError(f"No room with id {options['room']}.")
        tty = sys.stdout.isatty()
        for room in rooms.order_by("pk"):
            self.stdout.write(f"room {room.pk} “{room.title}”")

            def progress(done: int, total: int) -> None:
                if tty:
                    self.stdout.write("\r  " + bar(done, total), ending="")
                    self.stdout.flush()

            try:
                report = passes.backfill(room.pk, progress=progress)
            except ProviderTrouble as exc:
                raise CommandError(
                    f"room {room.pk}: the Utility model failed ({exc}). Run again to continue."
                ) from exc
            except KeyboardInterrupt:
                self.stdout.write("\nStopped. Run the same command again to continue where it stopped.")
                return
            if tty:
                self.stdout.write("")
            problems = f", problems: {'; '.join(report.problems)}" if report.problems else ""
            self.stdout.write(
                f"  written {report.written}, removed {report.deleted}, indexed {report.indexed}{problems}"
            )
