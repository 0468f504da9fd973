"""Run AI turns inside the web process, owned by the server rather than by any socket.

A turn is an asyncio task: closing the tab that asked for it changes nothing. Tokens go to the
room group as they arrive; the text is saved every half second so a reload shows it; Stop is a
flag in Redis (any web node can set it) that the task checks while streaming.

- `context`: what a turn reads once at its start, and opening its reply;
- `rounds`: who speaks, one after another, and the auto chain;
- `stream`: a reply from the provider into its variant and to the room;
- `stop`: the Stop flag;
- `impersonate`: a draft of the person's next message.
"""

from __future__ import annotations

from rooms.turns.impersonate import DraftFailed, impersonate
from rooms.turns.rounds import start_turn
from rooms.turns.stop import request_stop
from rooms.turns.stream import running

__all__ = ["DraftFailed", "impersonate", "request_stop", "running", "start_turn"]
