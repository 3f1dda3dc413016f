// herder's terminal page: a command run in a task, shown in xterm.js (vendored in xterm/), over the UI's
// WebSocket /ui/s/<secret>/ws/allocations/{id}/exec (the session's) with the frames of the API's
// interactive exec (docs/agent.md):
// keystrokes go as {"stdin": {"data": base64}}, the terminal's size as {"tty_size": ...}, and
// {"stdout"|"stderr": {"data": base64}} are written to the terminal until {"exited": true, ...}.
// The socket is authenticated by the session (its prefix and cookie); this script holds no token.
"use strict";

// The command field: a JSON array of strings as it is, else words separated by spaces.
function commandOf(text) {
  const trimmed = text.trim();
  return trimmed.startsWith("[") ? trimmed : JSON.stringify(trimmed.split(/\s+/).filter(Boolean));
}

function toBase64(bytes) {
  let binary = "";
  for (const byte of bytes) {
    binary += String.fromCharCode(byte);
  }
  return btoa(binary);
}

function fromBase64(text) {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

function setup(form, element) {
  const state = document.getElementById("exec-state");
  const button = form.querySelector("button");
  const term = new Terminal({convertEol: false, scrollback: 5000});
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(element);
  fit.fit();
  window.addEventListener("resize", () => fit.fit());
  const encoder = new TextEncoder();

  function start() {
    const url = new URL(form.dataset.socket, window.location.href);
    url.protocol = window.location.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("task", form.dataset.task);
    url.searchParams.set("command", commandOf(form.elements.command.value));
    url.searchParams.set("tty", "true");
    const socket = new WebSocket(url);
    const send = (frame) => {
      if (socket.readyState === WebSocket.OPEN) {
        socket.send(JSON.stringify(frame));
      }
    };
    const size = () => send({tty_size: {height: term.rows, width: term.cols}});
    const listeners = [
      term.onData((data) => send({stdin: {data: toBase64(encoder.encode(data))}})),
      term.onBinary((data) => send({stdin: {data: btoa(data)}})),
      term.onResize(size),
    ];
    let exited = null;
    button.disabled = true;
    state.textContent = "connecting…";
    term.reset();
    socket.addEventListener("open", () => {
      state.textContent = "running";
      size();
      term.focus();
    });
    socket.addEventListener("message", (event) => {
      const frame = JSON.parse(event.data);
      for (const stream of ["stdout", "stderr"]) {
        if (frame[stream] && frame[stream].data) {
          term.write(fromBase64(frame[stream].data));
        }
      }
      if (frame.exited) {
        exited = frame.result ? frame.result.exit_code : null;
      }
    });
    socket.addEventListener("close", (event) => {
      listeners.forEach((listener) => listener.dispose());
      button.disabled = false;
      if (exited !== null) {
        state.textContent = `exited with code ${exited}`;
      } else if (event.code === 1006) {
        // A refused handshake tells the page nothing more (the session ended, the task stopped).
        state.textContent = "could not connect, or the connection was lost: reload the page to see why";
      } else {
        state.textContent = `closed${event.reason ? ": " + event.reason : ""}`;
      }
      state.dataset.exitCode = exited === null ? "" : String(exited);
    });
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    start();
  });
  start();
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("exec-form");
  const element = document.getElementById("terminal");
  if (form && element) {
    setup(form, element);
  }
});
