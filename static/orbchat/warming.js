// The chat page's "warming up the memory model…" line: asks the server twice a second whether
// the memory model has loaded since the start, and removes the line once it has.
(() => {
  const line = document.getElementById("memory-warming");
  if (!line) return;
  async function check() {
    try {
      const response = await fetch(line.dataset.stateUrl, { headers: { Accept: "application/json" } });
      if (response.ok && !(await response.json()).warming) {
        line.remove();
        return;
      }
    } catch (error) {
      // The server is restarting: ask again.
    }
    setTimeout(check, 500);
  }
  setTimeout(check, 500);
})();
