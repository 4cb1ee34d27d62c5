// The inspector's one script. Pages work without it; it only adds conveniences.
"use strict";

// A running turn: follow its resumable event stream and append each delta as it arrives.
// EventSource reconnects by itself with Last-Event-ID, which the stream resumes from.
function followRunning() {
  const box = document.getElementById("running");
  if (!box || !window.EventSource) return;
  const live = box.querySelector(".live");
  const state = box.querySelector(".state");
  const source = new EventSource(box.dataset.events);
  source.addEventListener("delta", (event) => {
    live.textContent += JSON.parse(event.data).text;
    box.dataset.received = String(Number(box.dataset.received || 0) + 1);
  });
  source.addEventListener("done", () => {
    source.close();
    state.textContent = "finished";
    box.dataset.finished = "done";
  });
  source.addEventListener("error", (event) => {
    if (event.data) {  // the stream's own error event; a dropped connection has no data
      source.close();
      state.textContent = "failed: " + JSON.parse(event.data).error.message;
      box.dataset.finished = "error";
    }
  });
}

document.addEventListener("DOMContentLoaded", followRunning);
