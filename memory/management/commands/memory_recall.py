"""Ask "what would recall pick, and why?": `python manage.py memory_recall ROOM_ID --message TEXT`.

A dry run of the recall pipeline for a hypothetical next message from the host, with the room's
current settings: nothing is saved, nobody is notified.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from memory.turn_memory import recall_dry_run
from rooms import services
from rooms.models import Room
from rooms.options import room_options


class Command(BaseCommand):
    help = "Dry-run memory recall for a hypothetical next message and show what it picks and rejects."

    def add_arguments(self, parser) -> None:
        parser.add_argument("room_id", type=int)
        parser.add_argument("--message", required=True, help="The hypothetical next message.")
        parser.add_argument(
            "--speaker", help="The seated character who would answer (default: the next one)."
        )
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args, room_id: int, message: str, speaker: str | None, **options) -> None:
        room = Room.objects.select_related("host", "preset", "persona").filter(pk=room_id).first()
        if room is None:
            raise CommandError(f"No room with id {room_id}.")
        if not message.strip():
            raise CommandError("--message is empty: give the text of the hypothetical next message.")
        seat = self._seat(room, speaker)
        outcome = recall_dry_run(room=room, seat=seat, text=message)
        report = {
            "mode": outcome.mode,
            "query": outcome.query,
            "pool": outcome.pool,
            "count": outcome.count,
            "kept": [
                {
                    "tier": s.item.tier,
                    "block": s.item.block,
                    "seq_from": s.item.seq_from,
                    "seq_to": s.item.seq_to,
                    "score": round(s.score, 4),
                    "text": s.item.text,
                }
                for s in outcome.kept
            ],
            "quotes": [
                {"seq": q.turn.seq, "speaker": q.turn.speaker, "score": round(q.score, 4), "text": q.line}
                for q in outcome.quotes
            ],
            "rejected": [
                {"tier": r.item.tier, "block": r.item.block, "reason": r.reason} for r in outcome.rejected
            ],
        }
        if options["json"]:
            self.stdout.write(json.dumps(report, ensure_ascii=False, indent=2))
            return
        if outcome.state == "off":
            self.stdout.write(
                "Memory is off for this room (site switch, the host's switch, mode Off, or archived)."
            )
            return
        self.stdout.write(f"mode {report['mode']} · pool {report['pool']} · recalled {report['count']}")
        self.stdout.write(f"query: {report['query']!r}")
        for notice in outcome.notices:
            self.stdout.write(f"notice: {notice}")
        for s in outcome.kept:
            self.stdout.write(
                f"  kept   {s.item.label}  match {s.score:.0%}  {s.item.text.splitlines()[0][:60]}"
            )
        for q in outcome.quotes:
            self.stdout.write(f"  quote  #{q.turn.seq} {q.turn.speaker}  score {q.score:.3f}  {q.line[:60]}")
        for r in outcome.rejected:
            self.stdout.write(f"  reject {r.item.label}  {r.reason}")

    def _seat(self, room: Room, speaker: str | None):
        seats = list(services.seated(room))
        if speaker:
            for seat in seats:
                if seat.name.casefold() == speaker.casefold():
                    return seat
            names = ", ".join(s.name for s in seats) or "nobody"
            raise CommandError(f"No seated character named {speaker!r} in room {room.pk} (seated: {names}).")
        if room_options(room).narrator:
            return None
        try:
            return services.speaking_seat(room)
        except services.ActionRefused as exc:
            raise CommandError(str(exc)) from exc
