from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import make_owner

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "sillytavern"


@pytest.fixture
def owner(db):
    return make_owner()


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def fixture_file():
    def read(name: str) -> bytes:
        path = FIXTURES / name
        if not path.exists():
            pytest.skip(f"the shared SillyTavern fixtures are not here ({FIXTURES})")
        return path.read_bytes()

    return read
