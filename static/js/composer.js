// The composer's keyboard and state: Enter sends (Shift+Enter makes a new line, and nothing happens while an
// input method composes), the box grows with its text, a counter as the text nears the limit, Send becomes Stop
// while a run goes on (a message written meanwhile is queued by the server: Send comes back in Stop's place), the
// "+" menu closes on Escape or a click elsewhere, its ticked resources show as chips that remove them, and queued
// messages leave the queue once their turn shows.
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

  // The text box grows with its text up to its CSS max-height, then scrolls.
  function grow() {
    var form = composer();
    var box = form && form.querySelector("textarea[name=text]");
    if (!box || box.dataset.sized === box.value) return;  // the page's many other changes leave it alone
    box.dataset.sized = box.value;
    box.style.height = "auto";
    box.style.height = box.scrollHeight + 2 + "px";
  }

  // A chip for a resource the page did not render one for (a document found in the "+" menu).
  function newChip(form, input) {
    var list = form.querySelector(".chips");
    var name = input.closest("label").textContent.trim();
    var item = document.createElement("li");
    var chip = document.createElement("button");
    var label = document.createElement("span");
    var x = document.createElement("span");
    item.className = "chip-item";
    chip.type = "button";
    chip.className = "chip";
    chip.dataset.value = input.value;
    chip.setAttribute("aria-label", (list.dataset.remove || "%(name)s").replace("%(name)s", name));
    chip.title = chip.getAttribute("aria-label");
    label.className = "chip-label";
    label.textContent = name;
    x.className = "chip-x";
    x.setAttribute("aria-hidden", "true");
    x.textContent = "×";
    chip.append(label, x);
    item.append(chip);
    list.prepend(item);
  }

  // Each ticked resource shows as a chip; a chip's button unticks it.
  function chips() {
    var form = composer();
    if (!form) return;
    var ticked = {};
    form.querySelectorAll("input[name=resources]").forEach(function (input) {
      ticked[input.value] = input.checked;
      if (input.checked && !form.querySelector(".chip[data-value='" + CSS.escape(input.value) + "']")) newChip(form, input);
    });
    form.querySelectorAll(".chip[data-value]").forEach(function (chip) {
      chip.parentElement.hidden = !ticked[chip.dataset.value];
    });
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
        // Send and Stop share one place: Stop while a run goes on, Send again once something is written (to queue it;
        // the run's own Stop stays in the conversation).
        stop.hidden = !run || typed;
        stop.dataset.run = run ? run.id.replace(/^run-/, "") : "";
        send.hidden = !!run && !typed;
        form.classList.toggle("run-going-on", !!run);
      }
    }
    // A queued message whose turn is on the page has been sent.
    document.querySelectorAll("#queue .queued-message[data-message]").forEach(function (item) {
      if (document.querySelector(".turn[data-message='" + item.dataset.message + "']")) item.remove();
    });
  }

  function menu() {
    var form = composer();
    return form ? form.querySelector("details.add-menu") : null;
  }
  document.addEventListener("change", function (event) {
    var input = event.target;
    if (!(input instanceof HTMLInputElement) || !input.form || input.form.id !== "composer") return;
    // A document found and ticked joins the chosen ones, so that the next search does not take it away.
    var found = input.closest(".documents-found li");
    if (found && input.checked) {
      input.form.querySelector(".chosen-documents").append(input.closest("label"));
      found.remove();
    }
    chips();
  });
  // Enter in the documents' search searches; it does not send the message.
  document.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && event.target instanceof Element && event.target.matches("#composer .find-documents")) {
      event.preventDefault();
    }
  });
  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target : null;
    var chip = target ? target.closest("#composer .chip[data-value]") : null;
    if (chip) {
      var form = composer();
      form.querySelectorAll("input[name=resources]").forEach(function (input) {
        if (input.value === chip.dataset.value) input.checked = false;
      });
      // Focus goes to the next chip still shown, else to the "+" menu: never lost on a hidden button.
      var items = Array.from(form.querySelectorAll(".chip-item:not([hidden]) .chip"));
      var next = items[items.indexOf(chip) + 1] || items[items.indexOf(chip) - 1];
      chips();
      (next && next !== chip ? next : form.querySelector("details.add-menu > summary")).focus();
      return;
    }
    var open = menu();
    if (open && open.open && target && !open.contains(target)) open.open = false;  // a click elsewhere closes it
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var open = menu();
    if (!open || !open.open) return;
    event.preventDefault();
    event.stopPropagation();
    open.open = false;
    open.querySelector("summary").focus();
  }, true);

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
      grow();
    }
  });

  var pending = null;
  function later() {
    if (pending === null) pending = setTimeout(function () { pending = null; sync(); count(); chips(); grow(); }, 0);
  }
  function start() {
    new MutationObserver(later).observe(document.body, {
      childList: true, subtree: true, attributes: true, attributeFilter: ["data-status"],
    });
    sync();
    count();
    chips();
    grow();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
