"""What memory does when the rooms app reports a change (`rooms.signals`); transport only."""

from __future__ import annotations

from memory import selectors
from memory.services import indexing, runs, summaries


def reply_committed(sender, *, room_id: int, **kwargs) -> None:
    runs.reply_arrived(room_id=room_id)


def messages_changed(sender, *, room_id: int, seqs: list[int], **kwargs) -> None:
    summaries.messages_changed(room_id=room_id, seqs=seqs)


def messages_rewound(sender, *, room_id: int, from_seq: int, **kwargs) -> None:
    summaries.messages_rewound(room_id=room_id, from_seq=from_seq)


def room_rehosted(sender, *, room_id: int, old_host_id: int, **kwargs) -> None:
    summaries.room_rehosted(room_id=room_id, old_host_id=old_host_id)


def embedding_changed(sender, *, user, **kwargs) -> None:
    if selectors.has_vectors(user):
        indexing.generations_ensure(user)
