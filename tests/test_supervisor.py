from __future__ import annotations

import pytest

from orbchat.supervisor import parse_procfile
from tests.services import REPO


def test_the_procfile_names_release_web_and_worker():
    processes = parse_procfile((REPO / "Procfile").read_text())
    assert set(processes) == {"release", "web", "worker"}
    assert processes["release"] == "python manage.py migrate --noinput"


def test_comments_and_blank_lines_are_skipped():
    assert parse_procfile("# note\n\nweb: daphne app\n") == {"web": "daphne app"}


def test_a_malformed_line_is_named():
    with pytest.raises(ValueError, match="Procfile line 2 is not 'name: command'"):
        parse_procfile("web: daphne app\njust words\n")
