"""News from the connections app for the apps above it (memory listens, `memory.apps`)."""

from __future__ import annotations

from django.dispatch import Signal

# `user` chose another Text-embedding model; sent once the change is committed.
embedding_changed = Signal()  # user
