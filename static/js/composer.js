// The composer's keyboard and state: Enter sends (Shift+Enter makes a new line, and nothing happens while an
// input method composes), a counter as the text nears the limit, Send becomes Stop while a run goes on (a message
// written meanwhile is queued by the server), and queued messages leave the queue once their turn shows.
(function () {
  "use strict";

  function composer() { return document.getElementById("composer"); }

  function runningRun() {
    var runs = document.querySelectorAll("#messages article.answer[data-status=running]");
    return runs.length ? runs[runs.length - 1] : null;
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (!(target instanceof HTMLTextAreaElement) || !target.form || target.form.id !== "composer") return;
    if (event.key !== "Enter" || event.shiftKey || event.isComposing || event.keyCode === 229) return;
    event.preventDefault();
    if (target.value.trim()) target.form.requestSubmit();
  });

  function count() {
    var form = composer();
    if (!form) return;
    var box = form.querySelector("textarea[name=text]");
    var counter = form.querySelector(".counter");
    var max = parseInt(form.dataset.maxChars || "0", 10);
    if (!box || !counter || !max) return;
    var length = box.value.length;
    if (length < max * 0.9) {
      if (counter.textContent) counter.textContent = "";
      form.classList.remove("over-limit");
      return;
    }
    var over = length > max;
    counter.textContent = over
      ? (length - max).toLocaleString() + " " + form.dataset.charsOver
      : (max - length).toLocaleString() + " " + form.dataset.charsLeft;
    form.classList.toggle("over-limit", over);
  }

  function sync() {
    var form = composer();
    if (form) {
      var run = runningRun();
      var send = form.querySelector("button.send");
      var stop = form.querySelector("button.composer-stop");
      var box = form.querySelector("textarea[name=text]");
      if (send && stop) {
        var typed = box && box.value.trim() !== "";
        stop.hidden = !run;
        stop.dataset.run = run ? run.id.replace(/^run-/, "") : "";
        send.hidden = !!run && !typed;  // during a run, Send shows only to queue what was written
        form.classList.toggle("run-going-on", !!run);
      }
    }
    // A queued message whose turn is on the page has been sent.
    document.querySelectorAll("#queue .queued-message[data-message]").forEach(function (item) {
      if (document.querySelector(".turn[data-message='" + item.dataset.message + "']")) item.remove();
    });
  }

  document.addEventListener("click", function (event) {
    var stop = event.target instanceof Element ? event.target.closest("#composer button.composer-stop") : null;
    if (!stop) return;
    event.preventDefault();
    var id = stop.dataset.run;
    if (!id) return;
    var own = document.querySelector("#stop-" + CSS.escape(id) + " button.stop");
    if (own) { own.click(); return; }
    var form = composer();
    if (form && window.htmx) {
      window.htmx.ajax("POST", form.dataset.stopUrl.replace("00000000-0000-0000-0000-000000000000", id), {
        source: form, swap: "none",
      });
    }
  });

  document.addEventListener("input", function (event) {
    if (event.target instanceof HTMLTextAreaElement && event.target.form && event.target.form.id === "composer") {
      count();
      sync();
    }
  });

  var pending = null;
  function later() {
    if (pending === null) pending = setTimeout(function () { pending = null; sync(); count(); }, 0);
  }
  function start() {
    new MutationObserver(later).observe(document.body, {
      childList: true, subtree: true, attributes: true, attributeFilter: ["data-status"],
    });
    sync();
    count();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
