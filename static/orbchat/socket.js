// The site-wide websocket: one per tab, reconnecting with backoff; its state shows in the header.
(function () {
  "use strict";
  const badge = document.getElementById("socket-state");
  const labels = {
    connecting: "Connecting…",
    connected: "Live",
    reconnecting: "Reconnecting…",
    closed: "Signed out",
  };
  let delay = 500;

  function show(state) {
    if (!badge) return;
    badge.dataset.state = state;
    badge.textContent = labels[state];
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/`);
    socket.addEventListener("message", (event) => {
      const data = JSON.parse(event.data);
      if (data.type === "hello") {
        delay = 500;
        show("connected");
      }
      if (data.type === "notice") {
        // Notices for this user (an invitation, a host offer) show on whatever page is open.
        const item = document.createElement("li");
        item.className = "flash-info";
        item.textContent = data.text;
        document.getElementById("site-notices")?.appendChild(item);
      }
      document.dispatchEvent(new CustomEvent("orbchat:socket", { detail: data }));
    });
    socket.addEventListener("close", (event) => {
      if (event.code === 4401) {  // the server says this tab is not signed in
        show("closed");
        return;
      }
      show("reconnecting");
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 15000);
    });
    window.orbchatSocket = socket;
  }

  show("connecting");
  connect();
})();
