"""News from the rooms app for the apps above it (memory), sent by the service that made the change.

A lower layer never imports a higher one: rooms says what happened, and memory, which listens
(`memory.apps.MemoryConfig.ready`), decides what that means for the summaries. Receivers run in
the sender's transaction, so what they mark is committed or rolled back with the change itself.
"""

from __future__ import annotations

from django.dispatch import Signal

# A reply was committed to `room_id`: memory may have a block to write.
reply_committed = Signal()  # room_id
# Messages `seqs` of `room_id` changed (edit, swipe, hide, delete of one).
messages_changed = Signal()  # room_id, seqs
# Everything from `from_seq` on was deleted (a rewind).
messages_rewound = Signal()  # room_id, from_seq
# The room has a new host; `old_host_id` had it before.
room_rehosted = Signal()  # room_id, old_host_id
