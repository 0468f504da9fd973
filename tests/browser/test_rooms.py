"""A shared room, end to end: a host and a member in two browser contexts.

The host starts a chat, seats a second character and invites the member by link; both chat live
and watch the same stream; the host removes a character mid-story (the timeline shows it); the
member is refused the host's pages; a kicked member is cut off at once.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from orbchat.connections import services as connection_services
from orbchat.library import services as library_services
from rooms.models import Room
from tests.factories import PASSWORD, make_owner, make_user
from tests.fakes.llm import Reply

pytestmark = pytest.mark.browser

SECOND = "Teague Ross"
SECOND_CARD = {
    "name": SECOND,
    "description": "{{char}} skippers the supply boat Patient Gull and never says more than he must.",
    "personality": "Gruff, careful, kind underneath.",
    "scenario": "",
    "first_mes": '*Teague coils a rope.* "Fog\'s in."',
    "talkativeness": 0.0,  # he answers only when named: the turn order stays deterministic
}
STREAM_TIMEOUT = 20000


@pytest.fixture
def contexts(browser, live_site, transactional_db):
    """Two separate browser contexts (no shared cookies): the host's and the member's."""
    opened = []

    def open_context():
        context = browser.new_context(base_url=live_site)
        context.set_default_timeout(15000)
        opened.append(context)
        return context

    yield open_context
    for context in opened:
        context.close()


def sign_in(context, username):
    page = context.new_page()
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Chats", exact=True)).to_be_visible()
    return page


def send(page, text):
    page.get_by_label("Your message").fill(text)
    page.get_by_role("button", name="Send").click()


def socket_open(page):
    expect(page.locator(".room")).to_have_attribute("data-socket", "open")


def test_host_and_member_share_a_room_until_the_member_is_kicked(contexts, fake_llm):
    owner = make_owner(username="owner")
    member_user = make_user(actor=owner, username="member")
    # The member writes as a persona of their own, so both people's messages are told apart.
    library_services.persona_create(owner=member_user, name="Wren", is_default=True)
    library_services.character_create(owner=owner, card=SECOND_CARD)
    connection_services.connection_create(
        owner=owner, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
    )

    # 1. The host starts a chat with Maren, seats Teague and creates an invite link.
    host = sign_in(contexts(), "owner")
    host.get_by_role("link", name="Characters").click()
    host.get_by_role("link", name="Maren Tallis").click()
    host.get_by_role("button", name="New chat").click()
    expect(host.get_by_role("heading", name="Maren Tallis")).to_be_visible()
    expect(host.locator("#messages > .message").first).to_contain_text("I keep the Light.")
    room_url = re.sub(r"^https?://[^/]+", "", host.url)
    room = Room.objects.get(host=owner)
    assert room_url == f"/chats/{room.pk}/"

    host.get_by_role("link", name="People & seats").click()
    host.get_by_label("Add a character").select_option(label=SECOND)
    host.get_by_role("button", name="Seat", exact=True).click()
    expect(host.get_by_text(f"{SECOND} takes a seat from message #1.")).to_be_visible()
    expect(host.locator(f'.timeline-row[data-seat-name="{SECOND}"] rect.seated')).to_have_attribute(
        "data-start", "1"
    )
    host.get_by_role("button", name="Create invite link").click()
    link = host.get_by_label("Invite link").input_value()
    assert "/invite/" in link

    # 2. The member opens the link, sees the preview and joins.
    member = sign_in(contexts(), "member")
    member.goto(link)
    expect(member.get_by_role("heading", name="Invitation")).to_be_visible()
    expect(member.locator(".invite-title")).to_have_text("Maren Tallis")
    expect(member.get_by_text("owner invites you to the room")).to_be_visible()
    expect(member.get_by_text("1 person in it so far")).to_be_visible()
    member.get_by_role("button", name="Join the room").click()
    expect(member).to_have_url(re.compile(re.escape(room_url) + "$"))
    expect(member.get_by_text("You joined “Maren Tallis”.")).to_be_visible()
    expect(member.get_by_role("heading", name="Maren Tallis")).to_be_visible()
    expect(member.get_by_role("button", name=f"Ask {SECOND} to speak")).to_be_visible()

    host.get_by_role("link", name="Back to the chat").click()
    socket_open(host)
    socket_open(member)
    for page in (host, member):  # each sees the other one online
        people = page.get_by_role("list", name="People in this room")
        expect(people.locator(f'li[data-user="{owner.pk}"]')).to_have_class(re.compile(r"\bonline\b"))
        expect(people.locator(f'li[data-user="{member_user.pk}"]')).to_have_class(re.compile(r"\bonline\b"))

    # 3. Both chat live: the host names Maren, whose slow reply streams to both pages.
    maren_reply = '*Maren sets down the lantern.* "Sit, both of you." ' + "The lens turns slowly. " * 8
    teague_reply = '*Teague shrugs.* "Nothing new on the mainland."'
    fake_llm.script(Reply(maren_reply, token_delay=0.05), Reply(teague_reply, token_delay=0.02))
    # A name counts only when written in full: "Maren" alone would not call on "Maren Tallis".
    send(host, "Good evening, Maren Tallis. May my friend come in too?")
    for page in (host, member):
        human = page.locator(".message.human").last
        expect(human).to_contain_text("Good evening, Maren Tallis.")
        expect(human.locator(".speaker")).to_have_text("owner")
    for page in (host, member):  # tokens arrive on both pages before the reply is done
        expect(page.locator(".message.streaming")).to_contain_text("Maren sets down the lantern.")
    for page in (host, member):
        expect(page.locator(".message.streaming")).to_have_count(0, timeout=STREAM_TIMEOUT)
        reply = page.locator("#messages > .message").last
        expect(reply.locator(".speaker")).to_have_text("Maren Tallis")
        expect(reply.locator(".speech")).to_contain_text("Sit, both of you.")
        expect(reply).to_contain_text("The lens turns slowly.")

    send(member, f"Thank you. {SECOND}, any news from the mainland?")
    for page in (host, member):
        human = page.locator(".message.human").last
        expect(human).to_contain_text("any news from the mainland?")
        expect(human.locator(".speaker")).to_have_text("Wren")
    for page in (host, member):
        expect(page.locator("#messages > .message").last).to_contain_text(
            "Nothing new on the mainland.", timeout=STREAM_TIMEOUT
        )
        expect(page.locator(".message.streaming")).to_have_count(0, timeout=STREAM_TIMEOUT)
        expect(page.locator("#messages > .message").last.locator(".speaker")).to_have_text(SECOND)
    completions = [r for r in fake_llm.requests if r.path.rstrip("/").endswith("/chat/completions")]
    assert len(completions) == 2  # one reply per named character, nobody else chimed in
    assert "any news from the mainland?" in str(completions[-1].body["messages"])

    # 4. The host removes Teague mid-story; the timeline ends his bar at this message number.
    at_removal = int(host.locator("#messages > .message").last.get_attribute("data-seq")) + 1
    room.refresh_from_db()
    # Maren's greeting, Teague's greeting on taking his seat, two people's lines and two replies.
    assert at_removal == room.next_seq == 6
    host.get_by_role("link", name="People & seats").click()
    host.locator(".seat-row", has_text=SECOND).get_by_role("button", name="Remove from the scene").click()
    expect(host.get_by_text(f"{SECOND} left the scene; earlier messages keep them.")).to_be_visible()
    expect(host.locator(".seat-row", has_text=SECOND)).to_have_count(0)
    teague_bars = host.locator(f'.timeline-row[data-seat-name="{SECOND}"] rect')
    expect(teague_bars).to_have_count(1)
    expect(teague_bars).not_to_have_class(re.compile(r"\bseated\b"))
    expect(teague_bars).to_have_attribute("data-start", "1")
    expect(teague_bars).to_have_attribute("data-end", str(at_removal))
    maren_bars = host.locator('.timeline-row[data-seat-name="Maren Tallis"] rect')
    expect(maren_bars).to_have_count(1)
    expect(maren_bars).to_have_class(re.compile(r"\bseated\b"))
    expect(maren_bars).to_have_attribute("data-start", "0")
    # The member's open room page drops Teague from the roster live.
    expect(member.get_by_role("button", name=f"Ask {SECOND} to speak")).to_have_count(0)
    expect(member.get_by_role("button", name="Ask Maren Tallis to speak")).to_be_visible()

    # 5. The member has no Preview or Settings, and the server refuses them when asked directly.
    actions = member.locator(".room .page-head .actions")
    expect(actions.get_by_role("link", name="People & seats")).to_be_visible()
    for name in ("Preview", "Settings", "Export .jsonl"):
        expect(actions.get_by_role("link", name=name)).to_have_count(0)
    for name in ("Regenerate", "Continue", "Stop"):
        expect(member.get_by_role("button", name=name)).to_be_hidden()
    socket_refusal = member.evaluate(
        """(roomId) => new Promise((resolve) => {
            const ws = new WebSocket(`ws://${location.host}/ws/rooms/${roomId}/`);
            ws.onopen = () => ws.send(JSON.stringify({ type: "regenerate" }));
            ws.onmessage = (event) => {
                const data = JSON.parse(event.data);
                if (data.type === "notice") { ws.close(); resolve(data); }
            };
        })""",
        room.pk,
    )
    assert socket_refusal == {"type": "notice", "status": 403, "text": "Only the host can do that."}
    maren_seat = room.seats.get(name="Maren Tallis")
    post_status = member.evaluate(
        """async (url) => {
            const csrf = JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"];
            const response = await fetch(url, { method: "POST", headers: { "X-CSRFToken": csrf } });
            return response.status;
        }""",
        f"/chats/{room.pk}/seats/{maren_seat.pk}/remove/",
    )
    assert post_status == 403
    for path in ("preview", "settings"):
        response = member.goto(f"{room_url}{path}/")
        assert response.status == 403, path
    assert maren_seat.presences.filter(left_seq__isnull=True).exists()  # the refused POST changed nothing

    # 6. The host kicks the member; the member's open room page is cut off at once.
    member.goto(room_url)
    socket_open(member)
    host.get_by_role("button", name="Remove member").click()
    expect(host.get_by_text("member was removed from the room.")).to_be_visible()
    expect(host.locator(".member-row")).to_have_count(0)
    notice = member.locator("#notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("You no longer have access to this room.")
    expect(member.locator(".room")).to_have_attribute("data-socket", "closed")
    response = member.reload()
    assert response.status == 404
    member.goto(link)  # the invite link does not let a kicked member back in
    member.get_by_role("button", name="Join the room").click()
    expect(member.get_by_role("alert")).to_have_text("The host removed you from this room.")
