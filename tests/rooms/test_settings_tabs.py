"""Two tabs: the settings page saves only what was edited on it, so a change made in the chat
page's controls after the settings page was opened is not put back by saving it."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.urls import reverse

from rooms import services
from rooms.models import Room
from rooms.options import room_options

pytestmark = pytest.mark.django_db


class FormValues(HTMLParser):
    """What a browser would post from the settings form (the page's form without an action),
    as (name, value) pairs."""

    def __init__(self) -> None:
        super().__init__()
        self.pairs: list[tuple[str, str]] = []
        self.inside = False
        self.select: str | None = None
        self.textarea: str | None = None

    def handle_starttag(self, tag, attrs) -> None:
        attrs = dict(attrs)
        if tag == "form":
            self.inside = "action" not in attrs
        if not self.inside:
            return
        name = attrs.get("name")
        if tag == "input" and name:
            if attrs.get("type") not in ("checkbox", "radio"):
                self.pairs.append((name, attrs.get("value") or ""))
            elif "checked" in attrs:
                self.pairs.append((name, attrs.get("value") or "on"))
        elif tag == "select":
            self.select = name
        elif tag == "option" and self.select and "selected" in attrs:
            self.pairs.append((self.select, attrs.get("value", "")))
        elif tag == "textarea":
            self.textarea = name
            self.pairs.append((name, ""))

    def handle_endtag(self, tag) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self.select = None
        elif tag == "textarea":
            self.textarea = None

    def handle_data(self, data) -> None:
        if self.textarea and self.inside:
            name, text = self.pairs.pop()
            self.pairs.append((name, text + data if text else data.removeprefix("\n")))


def page_form(client, room) -> dict[str, list[str]]:
    parser = FormValues()
    parser.feed(client.get(reverse("rooms:settings", args=[room.pk])).content.decode())
    values: dict[str, list[str]] = {}
    for name, value in parser.pairs:
        values.setdefault(name, []).append(value)
    return values


def test_saving_an_open_settings_page_keeps_what_the_controls_changed_since(signed_in, room):
    opened = page_form(signed_in, room)
    assert opened["turn_order"] == ["natural"] and opened["authors_note"] == [""]
    # Another tab: the chat page's controls change the turn order and the author's note.
    controls = {"field": ["turn_order", "authors_note"], "turn_order": "manual", "authors_note": "Fog."}
    assert signed_in.post(reverse("rooms:controls", args=[room.pk]), controls).status_code == 200

    # The settings page, opened before, is saved with only the title edited.
    opened["title"] = ["The harbour"]
    assert signed_in.post(reverse("rooms:settings", args=[room.pk]), opened).status_code == 302
    room = Room.objects.get(pk=room.pk)
    assert room.title == "The harbour"
    assert room_options(room).turn_order == "manual" and room.authors_note == "Fog."


def test_what_the_settings_page_edits_is_saved_over_the_controls(signed_in, room):
    opened = page_form(signed_in, room)
    controls = {
        "field": ["turn_order", "allow_self_replies"],
        "turn_order": "manual",
        "allow_self_replies": "on",
    }
    assert signed_in.post(reverse("rooms:controls", args=[room.pk]), controls).status_code == 200
    opened["turn_order"] = ["round_robin"]
    opened["members_see_memory"] = ["on"]
    assert signed_in.post(reverse("rooms:settings", args=[room.pk]), opened).status_code == 302
    options = room_options(Room.objects.get(pk=room.pk))
    assert (options.turn_order, options.members_see_memory, options.allow_self_replies) == (
        "round_robin",
        True,
        True,
    )


def test_an_untouched_page_saved_changes_nothing(signed_in, room):
    room.tags = ["sea", "night"]
    room.save(update_fields=["tags"])
    before = Room.objects.filter(pk=room.pk).values().get()
    assert (
        signed_in.post(reverse("rooms:settings", args=[room.pk]), page_form(signed_in, room)).status_code
        == 302
    )
    assert Room.objects.filter(pk=room.pk).values().get() == before


def test_two_option_saves_from_rooms_read_before_either_both_keep_theirs(room):
    """As two tabs' chat controls post at the same instant: each request read the room first."""
    first, second = Room.objects.get(pk=room.pk), Room.objects.get(pk=room.pk)
    services.room_settings_update(room=first, turn_order="list")
    services.room_settings_update(room=second, members_see_memory=True)
    options = room_options(Room.objects.get(pk=room.pk))
    assert options.turn_order == "list" and options.members_see_memory
