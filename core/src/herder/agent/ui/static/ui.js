// herder's web UI: what the pages do live. Every page reads without this script; with it, parts of a
// page are fetched again from the server (rendered and escaped there) when the event stream says that
// something changed, and a log page follows its log. No markup is built here from data: log text is
// added as text.
"use strict";

const SIGNED_OUT = "Signed out, or the session ended: reload the page to sign in again.";

function notice(text) {
  let note = document.getElementById("live-notice");
  if (!note) {
    note = document.createElement("p");
    note.id = "live-notice";
    note.className = "flash error";
    document.querySelector("main").prepend(note);
  }
  note.textContent = text;
}

// Fetch each live part of the page again: its URL (data-live) answers the part alone.
async function refresh(section) {
  try {
    const response = await fetch(section.dataset.live, {credentials: "same-origin"});
    if (response.status === 401) {
      notice(SIGNED_OUT);
      return false;
    }
    if (response.ok) {
      // Replaced only when it changed: an unchanged part keeps its elements (focus, an open list).
      const fresh = document.createElement("template");
      fresh.innerHTML = await response.text();
      if (fresh.innerHTML !== section.innerHTML) {
        section.replaceChildren(fresh.content);
      }
    }
  } catch (error) {
    // The agent is away (restarting): the next event or tick tries again.
  }
  return true;
}

function refreshAll() {
  document.querySelectorAll("[data-live]").forEach(refresh);
}

// Several events at once (a task starting) cause one refresh.
let pending = null;
function soon() {
  if (pending === null) {
    pending = setTimeout(() => { pending = null; refreshAll(); }, 200);
  }
}

function listen(main) {
  const source = new EventSource(main.dataset.events, {withCredentials: true});
  source.addEventListener("task-event", soon);
  // A reconnection (the agent restarted) may have missed events.
  source.addEventListener("open", soon);
}

function tick(section) {
  const every = Number(section.dataset.every) * 1000;
  const timer = setInterval(async () => {
    if (!(await refresh(section))) {
      clearInterval(timer);
    }
  }, every);
}

async function follow(pre) {
  const state = document.getElementById("follow-state");
  try {
    const response = await fetch(pre.dataset.follow, {credentials: "same-origin"});
    if (!response.ok) {
      state.textContent = response.status === 401 ? SIGNED_OUT : `(not following: ${response.status})`;
      return;
    }
    state.textContent = "(following)";
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const {value, done} = await reader.read();
      if (done) {
        break;
      }
      const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 4;
      pre.append(value);
      if (atBottom) {
        window.scrollTo(0, document.body.scrollHeight);
      }
    }
    state.textContent = "(the task has ended; reload for a new run)";
  } catch (error) {
    state.textContent = "(the connection ended: reload to follow again)";
  }
}

document.addEventListener("submit", (event) => {
  const button = event.submitter;
  if (button && button.dataset.confirm && !window.confirm(button.dataset.confirm)) {
    event.preventDefault();
  }
});

document.addEventListener("DOMContentLoaded", () => {
  const main = document.querySelector("main[data-events]");
  if (main) {
    listen(main);
  }
  document.querySelectorAll("[data-live][data-every]").forEach(tick);
  const log = document.querySelector("pre[data-follow]");
  if (log) {
    follow(log);
  }
});
