from __future__ import annotations

from orbchat.connections.providers import cache_hinted

MESSAGES = [
    {"role": "system", "content": "You are Maren."},
    {"role": "user", "content": "Hello."},
    {"role": "system", "content": "Past events: the key."},
    {"role": "user", "content": "Where is it?"},
]


def test_anthropic_gets_the_stable_prefix_marked_for_its_cache():
    hinted = cache_hinted("anthropic/claude-3-5-haiku", MESSAGES, 2)
    assert hinted[1]["content"] == [
        {"type": "text", "text": "Hello.", "cache_control": {"type": "ephemeral"}}
    ]
    assert hinted[0] == MESSAGES[0] and hinted[2:] == MESSAGES[2:]
    assert MESSAGES[1]["content"] == "Hello."  # the prompt itself is left as it was


def test_other_providers_and_no_stable_part_get_the_messages_as_they_are():
    assert cache_hinted("openai/gpt-4o", MESSAGES, 2) is MESSAGES
    assert cache_hinted("anthropic/claude-3-5-haiku", MESSAGES, 0) is MESSAGES
