// Turns: Copy (a message, an answer, a code block) with a fallback message where the clipboard is refused, and
// the tab's title saying an answer is ready when a run ends while the tab is in the background.
(function () {
  "use strict";

  function labels() { return document.getElementById("chat-layout") || document.body; }

  function feedback(button, ok) {
    var data = labels().dataset;
    var status = button.nextElementSibling;
    if (!status || !status.classList.contains("copy-status")) {
      status = document.createElement("span");
      status.className = "copy-status";
      status.setAttribute("role", "status");
      button.after(status);
    }
    status.textContent = ok ? data.copied : data.copyFailed;
    status.classList.toggle("error", !ok);
    clearTimeout(button._copyTimer);
    if (ok) button._copyTimer = setTimeout(function () { status.textContent = ""; }, 2500);
  }

  function copy(text, button) {
    if (!navigator.clipboard || !window.isSecureContext) { feedback(button, false); return; }
    navigator.clipboard.writeText(text).then(
      function () { feedback(button, true); },
      function () { feedback(button, false); }
    );
  }

  document.addEventListener("click", function (event) {
    if (!(event.target instanceof Element)) return;
    var button = event.target.closest("button.copy, button.copy-code");
    if (!button) return;
    var source = button.classList.contains("copy-code")
      ? button.parentElement.querySelector("code")
      : document.querySelector(button.dataset.copy);
    if (source) copy(source.innerText, button);
  });

  // Code blocks of answers and reports get their own Copy button.
  function decorate() {
    var label = labels().dataset.copyCode || "Copy code";
    document.querySelectorAll("#messages pre > code").forEach(function (code) {
      var pre = code.parentElement;
      if (pre.querySelector(":scope > button.copy-code")) return;
      var button = document.createElement("button");
      button.type = "button";
      button.className = "link copy-code";
      button.textContent = label;
      pre.classList.add("has-copy");
      pre.appendChild(button);
    });
  }

  // A run that ends while the tab is hidden: the title says the answer is ready, until the tab is seen.
  var baseTitle = document.title;
  var running = new Set();
  function runningIds() {
    return new Set(Array.from(document.querySelectorAll("#messages article.answer[data-status=running]")).map(function (a) { return a.id; }));
  }
  function watchRuns() {
    var now = runningIds();
    var ended = false;
    running.forEach(function (id) { if (!now.has(id)) ended = true; });
    running = now;
    if (ended && document.visibilityState === "hidden") {
      document.title = "✓ " + labels().dataset.finished + " — " + baseTitle;
    }
  }
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") document.title = baseTitle;
  });

  var pending = null;
  function later() {
    if (pending === null) pending = setTimeout(function () { pending = null; decorate(); watchRuns(); }, 0);
  }
  function start() {
    baseTitle = document.title;
    running = runningIds();
    decorate();
    new MutationObserver(later).observe(document.body, {
      childList: true, subtree: true, attributes: true, attributeFilter: ["data-status"],
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
