// A room page: one socket to the room; messages arrive as server-rendered HTML, tokens as text.
(function () {
  "use strict";
  const root = document.querySelector(".room");
  if (!root) return;
  const roomId = root.dataset.room;
  const list = document.getElementById("messages");
  const input = document.getElementById("composer-text");
  const notice = document.getElementById("notice");
  const retry = document.getElementById("retry");
  const csrf = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"];
  let socket = null;
  const early = new Map();  // tokens that arrived before their message's slot
  let delay = 500;
  const queue = [];

  // The messages scroll in their own area. At its bottom the view follows what arrives; scrolled
  // up, it stays put and the "new messages" pill offers the way back. Earlier messages (and,
  // reading the past, later ones) load a page at a time as the reader nears an edge.
  const scroller = document.getElementById("scroller");
  const pill = document.getElementById("new-messages");
  const earlierEdge = document.getElementById("earlier");
  const laterEdge = document.getElementById("later");
  const NEAR = 24;  // px from the bottom that still count as being at it
  const AHEAD = 800;  // px from an edge at which the next page is fetched
  let earlier = scroller.dataset.earlier === "1";
  let later = scroller.dataset.later === "1";  // reading the past: the newest are not loaded
  let following = !later;
  let loading = false;
  const held = new Map();  // live messages that arrived while later ones were not loaded

  function atBottom() {
    return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight <= NEAR;
  }

  function toBottom() {
    scroller.scrollTop = scroller.scrollHeight;
  }

  function follow() {
    following = true;
    pill.hidden = true;
    toBottom();
  }

  function arrived() {
    if (following) toBottom();
    else pill.hidden = false;
  }

  function mark(item) {
    list.querySelectorAll(".at-moment").forEach((other) => other.classList.remove("at-moment"));
    item.classList.add("at-moment");
    following = false;
    item.scrollIntoView({ block: "center" });
  }

  function parse(html) {
    const template = document.createElement("template");
    template.innerHTML = html.trim();
    template.content.querySelectorAll(".message").forEach(markMine);
    return template.content;
  }

  async function fetchPage(query) {
    // The partials of a page of messages; null (with a notice) when they could not be had.
    const response = await fetch(`${scroller.dataset.messagesUrl}?${query}`, { headers: { Accept: "text/html" } })
      .catch(() => null);
    if (response && response.ok) return response;
    showNotice(`Messages could not be loaded${response ? ` (${response.status})` : ""}.`, false);
    return null;
  }

  async function loadPage(side) {
    const edge = side === "before" ? list.firstElementChild : list.lastElementChild;
    if (!edge) return;
    loading = true;
    const query = new URLSearchParams({ [side]: edge.dataset.seq });
    const response = await fetchPage(query);
    const items = response && parse(await response.text());
    loading = false;
    if (!items) return;
    items.querySelectorAll(".message").forEach((item) => { if (document.getElementById(item.id)) item.remove(); });
    if (side === "before") {
      const fromBottom = scroller.scrollHeight - scroller.scrollTop;
      list.prepend(items);
      earlier = response.headers.get("X-Earlier") === "1";
      earlierEdge.hidden = !earlier;
      scroller.scrollTop = scroller.scrollHeight - fromBottom;
    } else {
      list.append(items);
      later = response.headers.get("X-Later") === "1";
      laterEdge.hidden = !later;
      if (!later) release();
    }
    requestAnimationFrame(loadMore);
  }

  function loadMore() {
    if (loading) return;
    if (earlier && scroller.scrollTop < AHEAD) loadPage("before");
    else if (later && scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < AHEAD) loadPage("after");
  }

  function release() {
    held.forEach((html, id) => upsert(id, html));
    held.clear();
  }

  scroller.addEventListener("scroll", () => {
    following = !later && atBottom();
    if (following) pill.hidden = true;
    loadMore();
  }, { passive: true });
  // Text arriving, a reply rendered, the composer or the window resized: keep to the bottom.
  const keep = new ResizeObserver(() => { if (following) toBottom(); });
  keep.observe(list);
  keep.observe(scroller);
  pill.addEventListener("click", async (event) => {
    event.preventDefault();
    if (later) {
      // Reading the past: replace it with the newest messages.
      list.replaceChildren();
      later = false;
      laterEdge.hidden = true;
      const response = await fetchPage(new URLSearchParams());
      if (!response) return;
      list.append(parse(await response.text()));
      earlier = response.headers.get("X-Earlier") === "1";
      earlierEdge.hidden = !earlier;
      release();
    }
    follow();
  });
  root.addEventListener("submit", (event) => {
    if (event.target.id !== "jump") return;
    const seq = event.target.elements.at.value;
    const item = list.querySelector(`li.message[data-seq="${CSS.escape(seq)}"]`);
    if (!item) return;  // not loaded: the form opens the chat at that message (?at=)
    event.preventDefault();
    mark(item);
  });

  function url(kind, messageId) {
    return root.dataset[kind + "Url"].replace("/messages/0/", `/messages/${messageId}/`);
  }

  function showNotice(text, canRetry) {
    notice.hidden = false;
    notice.querySelector(".notice-text").textContent = text;
    retry.hidden = !canRetry;
  }

  function clearNotice() {
    notice.hidden = true;
  }

  function send(frame) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(frame));
    else queue.push(frame);
  }

  function markMine(item) {
    if (item.dataset.author && item.dataset.author === root.dataset.me) item.classList.add("mine");
  }
  list.querySelectorAll(".message").forEach(markMine);

  function upsert(id, html) {
    const template = document.createElement("template");
    template.innerHTML = html.trim();
    const fresh = template.content.firstElementChild;
    markMine(fresh);
    const existing = document.getElementById(`m-${id}`);
    if (existing) existing.replaceWith(fresh);
    else list.appendChild(fresh);
    if (early.has(String(id))) {
      if (fresh.classList.contains("streaming")) fresh.querySelector(".text").append(early.get(String(id)));
      early.delete(String(id));
    }
    if (fresh === list.lastElementChild) arrived();
  }

  let online = new Set();
  function showOnline() {
    document.querySelectorAll(".people-online [data-user]").forEach((li) => {
      li.classList.toggle("online", online.has(li.dataset.user));
    });
  }

  async function refreshRoster() {
    // Seats and people changed: take the fresh roster from the page itself.
    const response = await fetch(location.pathname, { headers: { Accept: "text/html" } });
    if (!response.ok) return;
    const page = new DOMParser().parseFromString(await response.text(), "text/html");
    const fresh = page.querySelector(".roster");
    if (fresh) document.querySelector(".roster").replaceWith(fresh);
    showOnline();
  }

  // The memory indicator: dimmed until a reply recalls, "recalling" while it runs, then the count.
  const memoryIcon = document.getElementById("memory-icon");
  const memoryPopover = document.getElementById("memory-popover");
  const memoryDetail = document.getElementById("memory-detail");  // present for the host only
  let recallDetail = null;

  function memorySummary() {
    const state = memoryIcon.dataset.state;
    const count = Number(memoryIcon.dataset.count || 0);
    if (state === "off") return "Memory is off for this room.";
    if (state === "idle") return "No reply has recalled anything since you opened this chat.";
    if (state === "recalling") return "Recalling memories for the next reply…";
    if (count === 0) return "Recall ran for the last reply; nothing qualified.";
    return `${count} ${count === 1 ? "memory" : "memories"} recalled for the last reply.`;
  }

  function element(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (className) node.className = className;
    return node;
  }

  function renderDetail() {
    if (!memoryDetail) return;
    memoryDetail.replaceChildren();
    const d = recallDetail;
    if (!d || d.state !== "done") return;
    memoryDetail.append(element("p", "A fresh check with this room's current settings (the count on the icon is the real one).", "fresh"));
    memoryDetail.append(element("p", `Mode ${d.mode} · pool of ${d.pool} summaries`));
    memoryDetail.append(element("p", `Query: “${d.query}”`, "memory-query"));
    (d.notices || []).forEach((text) => memoryDetail.append(element("p", text, "notice")));
    const kept = element("ul");
    kept.className = "memory-kept";
    const reasons = {pinned: "pinned: sent with every reply", yours: "yours: sent with every reply"};
    d.kept.forEach((k) => {
      const why = reasons[k.why] || `match ${Math.round(k.score * 100)}%${k.keyword ? ` (keyword “${k.keyword}”)` : ""}`;
      kept.append(element("li", `${k.label} — ${why}`));
    });
    memoryDetail.append(element("p", d.kept.length ? "Sent with this reply:" : `Nothing recalled${d.why ? `: ${d.why}` : ""}.`, d.kept.length ? "" : "memory-why"), kept);
    if ((d.facts || []).length) {
      const sent = element("ul");
      sent.className = "memory-facts";
      d.facts.forEach((f) => sent.append(element("li", `${f.label} — ${f.reason}, score ${f.score.toFixed(2)}: “${f.text}”`)));
      memoryDetail.append(element("p", "Lasting facts:"), sent);
    }
    if (d.scene) memoryDetail.append(element("p", "The scene note went too."));
    if ((d.quotes || []).length) {
      const quotes = element("ul");
      quotes.className = "memory-quotes";
      d.quotes.forEach((q) => quotes.append(element("li", `${q.label} — found by ${q.found_by}, score ${q.score.toFixed(3)} (${q.why}): “${q.text}”`)));
      memoryDetail.append(element("p", "Quotes from the past (after the summaries in the memory budget):"), quotes);
    }
    if ((d.cut || []).length) {
      const cut = element("ul");
      cut.className = "memory-cut";
      d.cut.forEach((r) => cut.append(element("li", r.label)));
      memoryDetail.append(element("p", "Left out for the memory budget (pinned and yours come first, then recalled by rank):"), cut);
    }
    if (d.rejected.length) {
      const rejected = element("ul");
      rejected.className = "memory-rejected";
      d.rejected.forEach((r) => rejected.append(element("li", `${r.label}: ${r.reason}`)));
      memoryDetail.append(element("p", `Not recalled (${d.rejected_count} in all; a sample):`), rejected);
    }
    memoryDetail.append(element("p", "To read the recalled texts, open the Preview.", "muted small"));
  }

  function showMemory(state, count) {
    memoryIcon.dataset.state = state;
    memoryIcon.dataset.count = count || 0;
    document.getElementById("memory-count").textContent = state === "done" ? String(count) : "";
    document.getElementById("memory-summary").textContent = memorySummary();
  }

  async function openMemory() {
    const open = memoryPopover.hidden;
    if (open && !controls.hidden) closeControls(false);
    memoryPopover.hidden = !open;
    memoryIcon.setAttribute("aria-expanded", String(open));
    document.getElementById("memory-summary").textContent = memorySummary();
    if (open && memoryDetail && !recallDetail && memoryIcon.dataset.state === "done") {
      const response = await fetch(memoryIcon.dataset.detailUrl, { headers: { Accept: "application/json" } });
      if (response.ok) recallDetail = await response.json();
    }
    renderDetail();
  }
  function closeMemory() {
    memoryPopover.hidden = true;
    memoryIcon.setAttribute("aria-expanded", "false");
    memoryIcon.focus();
  }
  memoryIcon?.addEventListener("click", openMemory);
  document.getElementById("memory-close")?.addEventListener("click", closeMemory);
  document.addEventListener("orbchat:socket", (event) => {
    const data = event.detail;
    if (data.type === "recall_detail" && String(data.room) === roomId) {
      recallDetail = data.detail;
      if (!memoryPopover.hidden) renderDetail();
    }
  });

  // The host's memory cycle: the "Update memory?" prompt, then the running cycle's stages, the
  // Utility model's tokens and speed, and its text as it streams (host-only socket frames).
  const cycleBox = document.getElementById("memory-cycle");
  if (cycleBox) {
    const ask = document.getElementById("memory-ask");
    const run = document.getElementById("memory-run");
    const stages = document.getElementById("memory-stages");
    const live = document.getElementById("memory-live-text");
    const stageLabels = { summaries: "Summaries", facts: "Facts", scene: "Scene note", index: "Index" };
    const endings = { done: "done", cancelled: "cancelled — what was written is kept", failed: "stopped: the Utility model failed; it is tried again" };
    let running = false;

    function showStage(name, done, total) {
      let row = stages.querySelector(`[data-stage="${name}"]`);
      if (!row) {
        row = element("li", "");
        row.dataset.stage = name;
        stages.append(row);
      }
      stages.querySelectorAll("li").forEach((li) => li.classList.toggle("current", li === row));
      const finished = total > 0 && done >= total;
      row.classList.toggle("finished", finished);
      const label = stageLabels[name] || name;
      row.textContent = name === "summaries" ? `${label} ${done}/${total}` : `${label}${finished ? " ✓" : " …"}`;
    }
    function showCycle(data) {
      if (!running) {
        running = true;
        stages.replaceChildren();
        live.textContent = "";
      }
      ask.hidden = true;
      run.hidden = false;
      showStage(data.stage, data.done, data.total);
      document.getElementById("memory-tokens").textContent = String(data.tokens);
      document.getElementById("memory-speed").textContent = String(data.speed);
      if (data.text) live.textContent += data.text;
      const ended = data.state !== "running";
      document.getElementById("memory-run-state").textContent = ended ? endings[data.state] || data.state : "";
      document.getElementById("memory-run-cancel").hidden = ended;
      document.getElementById("memory-run-close").hidden = !ended;
      run.dataset.state = data.state;
      if (ended) running = false;
    }
    document.addEventListener("orbchat:socket", (event) => {
      const data = event.detail;
      if (data.type !== "memory_cycle" || String(data.room) !== roomId) return;
      if (data.kind === "ask") {
        ask.hidden = !data.messages;
        if (data.messages) document.getElementById("memory-ask-count").textContent = `${data.messages} new message${data.messages === 1 ? "" : "s"}`;
      } else {
        showCycle(data);
      }
    });
    document.getElementById("memory-run-close").addEventListener("click", () => { run.hidden = true; });
    // A cycle already running when the page opened: its panel as the server last saw it.
    const now = document.getElementById("memory-cycle-now");
    if (now) {
      const data = JSON.parse(now.textContent);
      (data.stages || []).forEach(([name, done, total]) => showCycle({ ...data, stage: name, done, total, text: "" }));
      showCycle(data);
    }
    document.querySelectorAll("form[data-cycle]").forEach((form) => {
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const response = await fetch(form.action, {
          method: "POST",
          headers: { "X-CSRFToken": csrf, Accept: "application/json" },
          body: new FormData(form),
        });
        if (!response.ok) return;
        if (form.dataset.cycle !== "cancel") ask.hidden = true;
        if (form.dataset.cycle === "start" && !running) {
          showCycle({ state: "running", stage: "scene", done: 0, total: 1, tokens: 0, speed: 0, text: "" });
          if (memoryPopover && !memoryPopover.hidden) closeMemory();
        }
        if (form.dataset.cycle === "cancel") document.getElementById("memory-run-state").textContent = "stopping after this step…";
      });
    });
  }

  // The chat controls: a drawer below the header at the right (a sheet along the bottom on a
  // phone). Each field saves itself as it changes, one request after another so that quick
  // changes land in the order they were made; "Saved" or the server's message shows beside it.
  const controls = document.getElementById("controls-drawer");
  const controlsToggle = document.getElementById("controls-toggle");
  const controlsForm = controls.querySelector(".controls-form");
  const narrow = matchMedia("(max-width: 640px)");
  let saving = Promise.resolve();

  function placeControls() {
    const header = document.querySelector(".site-header");
    controls.style.setProperty("--drawer-top", `${header ? header.getBoundingClientRect().bottom : 0}px`);
  }
  function openControls() {
    if (memoryPopover && !memoryPopover.hidden) {
      memoryPopover.hidden = true;
      memoryIcon.setAttribute("aria-expanded", "false");
    }
    placeControls();
    controls.hidden = false;
    controlsToggle.setAttribute("aria-expanded", "true");
    document.getElementById("controls-close").focus();
  }
  function closeControls(refocus) {
    // A field being typed in saves (its change event) before the drawer hides it.
    if (controls.contains(document.activeElement)) document.activeElement.blur();
    controls.hidden = true;
    controlsToggle.setAttribute("aria-expanded", "false");
    if (refocus) controlsToggle.focus();
  }
  controlsToggle.addEventListener("click", () => (controls.hidden ? openControls() : closeControls(true)));
  document.getElementById("controls-close").addEventListener("click", () => closeControls(true));
  window.addEventListener("resize", () => { if (!controls.hidden) placeControls(); });
  // On a phone the sheet covers the composer: a tap outside it gives the chat back.
  document.addEventListener("click", (event) => {
    if (controls.hidden || !narrow.matches || event.target.closest("#controls-drawer, #controls-toggle")) return;
    closeControls(false);
  });

  function controlBody(control) {
    const name = control.dataset.field;
    const body = new URLSearchParams({ field: name });
    control.querySelectorAll(`[name="${name}"]`).forEach((input) => {
      if ((input.type === "checkbox" || input.type === "radio") && !input.checked) return;
      body.append(name, input.value);
    });
    return body;
  }

  async function saveControl(control) {
    const status = control.querySelector(".control-status");
    status.className = "control-status small";
    status.textContent = "Saving…";
    const response = await fetch(controlsForm.action, {
      method: "POST",
      headers: { "X-CSRFToken": csrf, Accept: "application/json" },
      body: controlBody(control),
    }).catch(() => null);
    const data = response ? await response.json().catch(() => ({})) : {};
    if (response && response.ok) {
      status.textContent = "Saved";
      status.classList.add("saved");
      return;
    }
    const errors = data.errors || {};
    status.textContent = errors[control.dataset.field] || errors.__all__
      || (response ? `Not saved: the server refused (${response.status}).` : "Not saved: the server could not be reached.");
    status.classList.add("error");
  }
  controlsForm.addEventListener("change", (event) => {
    const control = event.target.closest(".control");
    if (control) saving = saving.then(() => saveControl(control));
  });
  controlsForm.addEventListener("submit", (event) => event.preventDefault());

  function onEvent(data) {
    if (data.type === "message") {
      if (later && !document.getElementById(`m-${data.id}`)) {
        held.set(data.id, data.html);
        pill.hidden = false;
      } else upsert(data.id, data.html);
    }
    else if (data.type === "recall") {
      if (data.state === "recalling") recallDetail = null;
      showMemory(data.state === "off" ? "off" : data.state, data.count);
    }
    else if (data.type === "token") {
      const item = document.getElementById(`m-${data.message}`);
      if (item) {
        item.querySelector(".text").append(document.createTextNode(data.delta));
        arrived();
      } else {
        early.set(String(data.message), (early.get(String(data.message)) || "") + data.delta);
      }
    } else if (data.type === "removed") {
      data.ids.forEach((id) => document.getElementById(`m-${id}`)?.remove());
    } else if (data.type === "notice") showNotice(data.text, data.retry);
    else if (data.type === "error") showNotice(data.message, false);
    else if (data.type === "online") {
      online = new Set(data.users.map(String));
      showOnline();
    } else if (data.type === "people") {
      if (data.reload) location.reload();
      else {
        if (data.text) showNotice(data.text, false);
        refreshRoster();
      }
    }
    else if (data.type === "draft") {
      input.value = data.text;
      input.focus();
    }
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/rooms/${roomId}/`);
    socket.addEventListener("open", () => {
      delay = 500;
      root.dataset.socket = "open";
      while (queue.length) socket.send(JSON.stringify(queue.shift()));
    });
    socket.addEventListener("message", (event) => onEvent(JSON.parse(event.data)));
    socket.addEventListener("close", (event) => {
      root.dataset.socket = "closed";
      if (event.code === 4404) {
        showNotice("You no longer have access to this room.", false);
        return;
      }
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 15000);
    });
  }

  async function post(target, body) {
    const response = await fetch(target, {
      method: "POST",
      headers: { "X-CSRFToken": csrf },
      body: new URLSearchParams(body),
    });
    if (!response.ok) {
      const data = await response.json().catch(() => ({}));
      showNotice(data.error || `The server refused (${response.status}).`, false);
    }
    return response;
  }

  // Inline edit: the text gives way to a box with Save and Cancel; Cancel (or Esc) puts the
  // text back as it was.
  function startEdit(item) {
    if (item.querySelector(".edit-box")) return;
    const raw = item.querySelector("template.raw").innerHTML;
    const box = document.createElement("textarea");
    box.className = "edit-box";
    box.setAttribute("aria-label", "Edit the message");
    box.value = new DOMParser().parseFromString(raw, "text/html").documentElement.textContent;
    box.rows = Math.min(20, box.value.split("\n").length + 1);
    const save = element("button", "Save edit", "primary");
    save.type = "button";
    const cancel = element("button", "Cancel");
    cancel.type = "button";
    cancel.dataset.cancel = "";
    const buttons = element("div", undefined, "edit-buttons");
    buttons.append(save, cancel);
    const text = item.querySelector(".text");
    const before = [...text.childNodes];
    text.replaceChildren(box, buttons);
    box.focus();
    box.setSelectionRange(box.value.length, box.value.length);
    item.cancelEdit = () => {
      text.replaceChildren(...before);
      delete item.cancelEdit;
      input.focus();
    };
    cancel.addEventListener("click", () => item.cancelEdit());
    save.addEventListener("click", async () => {
      const response = await post(url("edit", item.dataset.id), { text: box.value });
      if (response.ok) upsert(item.dataset.id, await response.text());
    });
  }

  // The ⋯ menu of a message (the rarely used actions); one open at a time.
  function closeMenus(except) {
    list.querySelectorAll(".message.menu-open").forEach((item) => {
      if (item === except) return;
      item.classList.remove("menu-open");
      item.querySelector(".more-menu").hidden = true;
      item.querySelector(".more-toggle").setAttribute("aria-expanded", "false");
    });
  }

  function toggleMenu(item, open) {
    closeMenus(item);
    const menu = item.querySelector(".more-menu");
    const show = open === undefined ? menu.hidden : open;
    menu.hidden = !show;
    menu.classList.remove("up");
    if (show && menu.getBoundingClientRect().bottom > scroller.getBoundingClientRect().bottom) menu.classList.add("up");
    item.classList.toggle("menu-open", show);
    item.querySelector(".more-toggle").setAttribute("aria-expanded", String(show));
  }

  document.addEventListener("click", (event) => {
    if (!event.target.closest(".message-actions")) closeMenus(null);
  });

  // A long press on a message (touch) opens its actions.
  let pressTimer = null;
  list.addEventListener("pointerdown", (event) => {
    if (event.pointerType !== "touch") return;
    const item = event.target.closest(".message");
    if (!item || event.target.closest("button, a, textarea, input, summary")) return;
    pressTimer = setTimeout(() => { pressTimer = null; toggleMenu(item, true); }, 500);
  });
  ["pointerup", "pointercancel", "pointermove"].forEach((name) => list.addEventListener(name, (event) => {
    if (name === "pointermove" && Math.abs(event.movementX) + Math.abs(event.movementY) < 4) return;
    clearTimeout(pressTimer);
    pressTimer = null;
  }));
  list.addEventListener("contextmenu", (event) => {
    if (event.pointerType === "touch" || matchMedia("(hover: none)").matches) {
      const item = event.target.closest(".message");
      if (item && !event.target.closest("a, textarea, input")) event.preventDefault();
    }
  });

  // Context used: what memory sent with one reply, loaded when its icon is pressed (the host
  // gets the detail, a member the counts: the server decides).
  async function toggleContext(item, button) {
    const open = item.querySelector(".context-used");
    if (open) {
      open.remove();
      button?.setAttribute("aria-expanded", "false");
      return;
    }
    const target = root.dataset.contextUrl.replace("/context/0/", `/context/${button.dataset.variant}/`);
    const response = await fetch(target, { headers: { Accept: "text/html" } });
    if (!response.ok) {
      showNotice("What memory sent with this reply could not be loaded.", false);
      return;
    }
    item.querySelector(".message-foot").after(parse(await response.text()));
    button.setAttribute("aria-expanded", "true");
  }

  list.addEventListener("click", async (event) => {
    const button = event.target.closest("[data-action]");
    if (!button) return;
    const item = button.closest(".message");
    const id = item.dataset.id;
    const action = button.dataset.action;
    if (action === "swipe") send({ type: "swipe", message: id, direction: button.dataset.direction });
    else if (action === "more") toggleMenu(item);
    else if (action === "edit") startEdit(item);
    else if (action === "context") toggleContext(item, button);
    else if (action === "context-close") toggleContext(item, item.querySelector(".context-toggle"));
    else if (action === "copy") {
      const raw = new DOMParser().parseFromString(item.querySelector("template.raw").innerHTML, "text/html");
      await navigator.clipboard?.writeText(raw.documentElement.textContent);
    } else if (action === "hide") {
      const response = await post(url("hide", id), { hidden: button.dataset.hidden });
      if (response.ok) upsert(id, await response.text());
    } else if (action === "delete" || action === "delete-after") {
      const after = action === "delete-after";
      const question = after ? "Delete this message and everything after it?" : "Delete this message?";
      if (!window.confirm(question)) return;
      const response = await post(url("delete", id), { after: after ? "1" : "0" });
      if (response.ok) (await response.json()).deleted.forEach((m) => document.getElementById(`m-${m}`)?.remove());
    }
  });

  document.getElementById("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    clearNotice();
    send({ type: "send", text });
    input.value = "";
    if (!later) follow();
  });
  // Enter sends and Shift+Enter starts a new line; on a phone (a touch screen) Enter starts a
  // new line unless the account chose "Enter sends on a phone"; Ctrl+Enter always sends.
  const phone = matchMedia("(hover: none) and (pointer: coarse)");
  function enterSends() {
    return !phone.matches || document.documentElement.hasAttribute("data-enter-sends-on-phone");
  }
  function describeKeys() {
    input.placeholder = enterSends()
      ? "Write as your persona… (Enter sends, Shift+Enter for a new line)"
      : "Write as your persona… (Ctrl+Enter or Send sends)";
  }
  describeKeys();
  phone.addEventListener("change", describeKeys);
  input.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.isComposing) return;
    if (event.ctrlKey || event.metaKey || (!event.shiftKey && enterSends())) {
      event.preventDefault();
      document.getElementById("composer").requestSubmit();
    }
  });

  // Keyboard shortcuts: ↑ in an empty composer edits your last message; ←/→ swipe the last
  // reply (from an empty composer or from no text field); Esc cancels an inline edit, closes
  // the memory panel, the chat controls or a menu, or stops the reply being written.
  function lastMine() {
    const mine = list.querySelectorAll(".message.mine");
    return mine[mine.length - 1] || null;
  }
  function typing(target) {
    return target.closest("textarea, input, select, [contenteditable]") !== null;
  }
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey || event.isComposing) return;
    const inComposer = event.target === input;
    const free = inComposer ? input.value === "" : !typing(event.target);
    if (event.key === "Escape") {
      const editing = event.target.closest(".message")?.cancelEdit ? event.target.closest(".message")
        : [...list.querySelectorAll(".message")].find((item) => item.cancelEdit);
      if (editing) editing.cancelEdit();
      else if (memoryPopover && !memoryPopover.hidden) closeMemory();
      else if (!controls.hidden) closeControls(true);
      else if (list.querySelector(".message.menu-open")) closeMenus(null);
      else if (root.dataset.role === "host" && list.querySelector(".message.streaming")) send({ type: "stop" });
      else return;
      event.preventDefault();
    } else if (event.key === "ArrowUp" && inComposer && input.value === "") {
      const item = lastMine();
      if (!item) return;
      event.preventDefault();
      startEdit(item);
    } else if ((event.key === "ArrowLeft" || event.key === "ArrowRight") && free && !event.shiftKey) {
      const last = list.lastElementChild;
      const arrow = last?.querySelector(`.swipes [data-direction="${event.key === "ArrowLeft" ? "left" : "right"}"]`);
      if (!arrow || arrow.disabled || arrow.offsetParent === null || later) return;
      event.preventDefault();
      arrow.click();
    }
  });
  root.addEventListener("click", (event) => {
    const button = event.target.closest("[data-speak]");
    if (!button) return;
    clearNotice();
    send({ type: "speak", seat: button.dataset.speak });
  });
  document.getElementById("stop").addEventListener("click", () => send({ type: "stop" }));
  document.getElementById("regenerate").addEventListener("click", () => { clearNotice(); send({ type: "regenerate" }); });
  document.getElementById("continue").addEventListener("click", () => { clearNotice(); send({ type: "continue" }); });
  document.getElementById("impersonate").addEventListener("click", () => send({ type: "impersonate" }));
  retry.addEventListener("click", () => {
    clearNotice();
    const last = list.lastElementChild;
    send({ type: last && last.dataset.kind === "character" && last.dataset.seq !== "0" ? "regenerate" : "reply" });
  });

  // Open at the latest message, or at the one a link (?at=N) lands on, outlined.
  const moment = list.dataset.at && list.querySelector(`li.message[data-seq="${list.dataset.at}"]`);
  if (moment) mark(moment);
  else if (following) toBottom();
  loadMore();
  connect();
})();
