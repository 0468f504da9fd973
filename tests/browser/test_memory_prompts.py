"""The Prompts section of Memory tuning in a browser, at desktop (1366×900) and phone (390×844)
width: a refused prompt shows why beside it, a valid one is kept and can be reset. Screenshots
of the section for a reviewer."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memory.models import MemoryTuning
from tests.browser.looks import SCREENSHOTS
from tests.browser.test_controls import tab  # noqa: F401 - a fixture

pytestmark = pytest.mark.browser


def test_the_host_rewrites_a_prompt_sees_a_refusal_and_resets_it(tab, size):  # noqa: F811
    tab.goto("/settings/memory/#prompts")
    section = tab.locator("#prompts")
    expect(section.get_by_role("heading", name="Prompts")).to_be_visible()
    block = section.get_by_label("Block summaries")
    assert block.input_value().startswith("You keep the memory of a long roleplay chat.")

    block.fill("Summarise for {{character}} in French.\n\n{{messages}}")
    tab.get_by_role("button", name="Save").click()
    errors = tab.locator("#prompt-block .field-errors")
    expect(errors).to_contain_text("Unknown placeholder {{character}}.")
    expect(errors).to_contain_text("This prompt offers {{messages}}, {{pov}}")
    assert not MemoryTuning.objects.exists()
    tab.locator("#prompt-block summary").click()
    errors.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SCREENSHOTS / f"memory-prompts-refused-{size}.png"))

    own_text = "Summarise for {{char}} in French.\n\n{{messages}}"
    tab.locator("#prompts").get_by_label("Block summaries").fill(own_text)
    tab.get_by_role("button", name="Save").click()
    expect(tab.get_by_text("Memory tuning saved.")).to_be_visible()
    assert MemoryTuning.objects.get().custom_prompts == {"block": own_text}
    own = tab.locator("#prompt-block")
    expect(own.get_by_text("Your own")).to_be_visible()
    tab.locator("#prompts").scroll_into_view_if_needed()
    tab.screenshot(path=str(SCREENSHOTS / f"memory-prompts-{size}.png"), full_page=False)

    own.get_by_role("button", name="Reset to built-in").click()
    expect(tab.get_by_text("Block summaries: the built-in prompt is back in use.")).to_be_visible()
    assert MemoryTuning.objects.get().custom_prompts == {}
    expect(tab.locator("#prompt-block").get_by_text("Built-in", exact=True)).to_be_visible()
