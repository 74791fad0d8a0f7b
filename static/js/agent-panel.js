// The agent panel, the run's state on each (re)connect, and Stop while the server is out of reach.
// - A delegation line's "Follow this agent" link loads the panel (htmx.ajax) into #agent-panel-slot; the page then
//   asks the websocket to follow that agent, whose panel body the server pushes with each change. Close or
//   Escape closes it and gives the focus back to the line. The click is heard on the document, not by an
//   hx-get on the link: a running agent's line is swapped whole by each progress push, and a click landing on
//   a line just replaced (not yet processed by htmx, or already detached) would otherwise follow the link to a
//   bare page, or do nothing.
// - Each time the websocket opens, the page sends the runs it shows as running: the server answers from each
//   run's lease whether it still lives (a dead one comes back failed, without its spinners and Stop).
// - Stop (and "Stop this agent") is an HTTP post: when the server cannot be reached, its form says so in place.
(function () {
  "use strict";

  var socket = null; // the htmx ws extension's socket wrapper (it queues messages while reconnecting)
  var opener = null; // the id of the link that opened the panel

  function panel() { return document.getElementById("agent-panel"); }
  function slot() { return document.getElementById("agent-panel-slot"); }
  function send(message) { if (socket) socket.send(JSON.stringify(message)); }
  function followed() {
    var p = panel();
    return p ? { run: p.dataset.run, agent: p.dataset.agent } : null;
  }
  function runningRuns() {
    return Array.from(document.querySelectorAll("article.answer[data-status=running]")).map(function (el) {
      return el.id.replace(/^run-/, "").replace(/-/g, "");
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    // After a server restart, try again soon (at most ~4 s apart), not after a minute.
    if (window.htmx) {
      window.htmx.config.wsReconnectDelay = function (retries) {
        return Math.min(500 * Math.pow(2, retries), 4000) * (0.5 + Math.random() / 2);
      };
    }
  });

  document.addEventListener("htmx:wsOpen", function (event) {
    socket = event.detail.socketWrapper;
    send({ state: runningRuns(), follow_agent: followed() });
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    var s = slot();
    if (!s || event.detail.target !== s) return;
    var p = panel();
    if (!p) return;
    opener = p.dataset.opener;
    document.body.classList.add("agent-panel-open");
    var close = p.querySelector(".agent-panel-close");
    (close || p).focus();
    send({ follow_agent: followed() });
  });

  function closePanel() {
    var s = slot();
    if (!s || !panel()) return;
    s.replaceChildren();
    document.body.classList.remove("agent-panel-open");
    send({ follow_agent: null });
    var line = opener && document.getElementById(opener);
    if (line) line.focus();
  }

  document.addEventListener("click", function (event) {
    if (!event.target.closest) return;
    if (event.target.closest(".agent-panel-close")) {
      closePanel();
      return;
    }
    var link = event.target.closest("a.follow-agent");
    var s = slot();
    if (!link || !s || !window.htmx || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
    event.preventDefault();
    // The slot is the request's source: always in the page, where the link may already have been replaced.
    window.htmx.ajax("GET", link.getAttribute("href"), { source: s, target: s, swap: "innerHTML" });
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && panel()) {
      event.preventDefault();
      closePanel();
    }
  });

  // Captured before the page's banner handler: its words are about a message kept, these about Stop.
  function stopFailed(event) {
    var elt = event.detail && event.detail.elt;
    var form = elt && elt.closest ? elt.closest(".stop-form, .agent-stop") : null;
    if (!form) return;
    event.stopPropagation();
    var note = form.querySelector(".stop-error");
    if (!note) {
      note = document.createElement("p");
      note.className = "stop-error error";
      note.setAttribute("role", "alert");
      form.appendChild(note);
    }
    note.textContent = event.type === "htmx:sendError" ? form.dataset.offline : form.dataset.failed;
  }
  document.addEventListener("htmx:sendError", stopFailed, true);
  document.addEventListener("htmx:responseError", stopFailed, true);
})();
