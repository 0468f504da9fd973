"""A room's play settings, kept in `Room.settings` and read through one typed view."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

REPLY_MODES = [
    ("per_speaker", "Per-speaker (each character answers in its own message)"),
    ("narrator", "Narrator (one message voices everyone)"),
]
TURN_ORDERS = [
    ("natural", "Natural (named characters answer; others by talkativeness)"),
    ("everyone", "Everyone in order"),
    ("round_robin", "Round-robin"),
    ("manual", "Only when I pick (@Name or a button)"),
]


@dataclass(frozen=True)
class RoomOptions:
    reply_mode: str = "per_speaker"
    turn_order: str = "natural"
    allow_self_replies: bool = False
    own_card_only: bool = False  # Per-speaker only: each speaker's prompt holds only its own card
    auto_turns: int = 0  # characters keep replying to each other up to this many rounds; 0 = off
    auto_delay: float = 1.5  # seconds between auto rounds
    members_see_memory: bool = False  # members get a read-only Memory panel

    @classmethod
    def from_json(cls, data: dict | None) -> RoomOptions:
        data = data or {}
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def narrator(self) -> bool:
        return self.reply_mode == "narrator"

    @property
    def own_cards(self) -> bool:
        """Each character sees only their own card (meaningful only Per-speaker)."""
        return self.own_card_only and not self.narrator


def room_options(room) -> RoomOptions:
    return RoomOptions.from_json(room.settings)
