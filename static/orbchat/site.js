// Page behaviour that would otherwise sit in inline handlers or style attributes, which the
// Content-Security-Policy refuses: markup asks for it with data- attributes, this file does it.
(function () {
  "use strict";

  // Sizes and positions computed on the server, applied through the CSSOM (allowed under CSP).
  const layout = {
    grow: (el, value) => { el.style.flexGrow = value; },
    left: (el, value) => { el.style.left = `${value}%`; },
    top: (el, value) => { el.style.top = `${value}px`; },
    mapHeight: (el, value) => { el.style.setProperty("--map-height", `${value}px`); },
  };
  const selector = "[data-grow], [data-left], [data-top], [data-map-height]";

  function applyLayout(root) {
    const found = [...root.querySelectorAll(selector)];
    if (root.matches && root.matches(selector)) found.push(root);
    for (const el of found) {
      for (const [name, apply] of Object.entries(layout)) {
        const value = Number(el.dataset[name]);
        if (el.dataset[name] !== undefined && Number.isFinite(value)) apply(el, value);
      }
    }
  }

  applyLayout(document);
  document.addEventListener("htmx:load", (event) => applyLayout(event.target));

  // A read-only field that selects itself when clicked (a new token, an invite link).
  document.addEventListener("click", (event) => {
    const field = event.target.closest("input[data-select-on-click]");
    if (field) field.select();
  });

  // A form that asks before it submits.
  document.addEventListener("submit", (event) => {
    const form = event.target.closest("form[data-confirm]");
    if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
  }, true);

  // A chat's memory-building progress, live from the socket.
  document.addEventListener("orbchat:socket", (event) => {
    const data = event.detail;
    const card = document.querySelector(".memory-status");
    if (data.type !== "progress" || !card || String(data.room) !== card.dataset.room) return;
    const bar = card.querySelector(".backfill-progress");
    bar.hidden = false;
    bar.max = data.total || 1;
    bar.value = data.done;
    card.querySelector(".backfill-label").textContent =
      data.done >= data.total ? "Backfill done." : `${data.done}/${data.total}`;
  });
})();
