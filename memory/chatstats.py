"""A chat's own term statistics for the built-in summariser, kept per process and read incrementally.

The first summary of a room reads every message's text once; later ones read only the messages
added since. Edits are not followed: a statistic over hundreds of messages barely moves with one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from django.db.models import F

from memory.extractive import ChatStats
from rooms.models import Message, Room, Variant

ROOMS = 16  # rooms whose statistics are kept
PAGE = 2000

_stats: OrderedDict[int, tuple[ChatStats, int]] = OrderedDict()  # room -> (stats, next seq to read)
_lock = threading.Lock()


def chat_stats(room: Room) -> ChatStats:
    """Return the room's statistics, brought up to its newest written message."""
    with _lock:
        stats, upto = _stats.pop(room.pk, (None, 0))
        if stats is None:
            stats = ChatStats()
        while True:
            rows = list(
                Message.objects.filter(
                    room=room,
                    seq__gte=upto,
                    hidden=False,
                    variants__index=F("active_index"),
                    variants__state__in=[Variant.State.DONE, Variant.State.STOPPED],
                )
                .order_by("seq")
                .values_list("seq", "variants__text")[:PAGE]
            )
            for seq, text in rows:
                stats.add(seq, text)
            if rows:
                upto = rows[-1][0] + 1
            if len(rows) < PAGE:
                break
        _stats[room.pk] = (stats, upto)
        while len(_stats) > ROOMS:
            _stats.popitem(last=False)
        return stats
