"""A quick password hasher for tests: PBKDF2 with few iterations.

Its hashes carry the algorithm name and iteration count, so the server processes that tests
start (with the normal settings) still verify them.
"""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000
