"""The browser enforces the site's Content-Security-Policy, and the browser tests notice a breach."""

from __future__ import annotations

PLANT_SCRIPT = """() => {
  const script = document.createElement("script");
  script.textContent = "window.plantedRan = true";
  document.body.append(script);
  const button = document.createElement("button");
  button.setAttribute("onclick", "window.handlerRan = true");
  document.body.append(button);
  button.click();
  return [window.plantedRan === true, window.handlerRan === true];
}"""


def test_a_planted_inline_script_and_handler_do_not_run_and_are_reported(page, csp_violations):
    page.goto("/setup/")
    assert page.evaluate(PLANT_SCRIPT) == [False, False]
    page.wait_for_function("true")  # let the violation events reach the console
    page.wait_for_timeout(300)
    assert any("script-src" in line for line in csp_violations), csp_violations
    csp_violations.clear()  # the detector worked; this breach was the test's own
