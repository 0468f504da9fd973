"""News from accounts for the apps above it, sent by the accounts services inside their transaction."""

from __future__ import annotations

from django.dispatch import Signal

# Sent with `user` when an account is deactivated: the apps that hold the person's open sockets
# close them (on commit).
user_deactivated = Signal()
