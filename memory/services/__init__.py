"""Writes of memory, one module per concern.

- `summaries`: write a summary or a roll-up, forget some, mark them stale when messages change.
- `indexing`: the vector index's generations, embedding what changed, re-indexing.
- `catch_up`: a pass over one room (plan, write, index) and the backfill.
- `person`: a person's edits (edit, pin, forget, add, generate now, rebuild).
- `facts`: a room's lasting facts (create, correct, a person's edit, pin, forget, restore, heat).
- `recall_log`: what recall did for a reply.
- `tuning`: the site's Memory tuning and a host's switch.
"""
