from __future__ import annotations

from tests.memory.conftest import host, room  # noqa: F401 - the same fixtures as memory's tests
