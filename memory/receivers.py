"""What memory does when the rooms app reports a change (`rooms.signals`); transport only."""

from __future__ import annotations

from memory import index, services


def reply_committed(sender, *, room_id: int, **kwargs) -> None:
    services.enqueue_catch_up(room_id)


def messages_changed(sender, *, room_id: int, seqs: list[int], **kwargs) -> None:
    services.messages_changed(room_id=room_id, seqs=seqs)


def messages_rewound(sender, *, room_id: int, from_seq: int, **kwargs) -> None:
    services.messages_rewound(room_id=room_id, from_seq=from_seq)


def room_rehosted(sender, *, room_id: int, old_host_id: int, **kwargs) -> None:
    services.room_rehosted(room_id=room_id, old_host_id=old_host_id)


def embedding_changed(sender, *, user, **kwargs) -> None:
    if index.has_vectors(user):
        index.live_generations(user)
