// The pages' few behaviours htmx does not have: pushes are idempotent, panels stay as the user left them,
// the answer is one live region, the page follows the answer, a refusal or a failure is said next to its
// form, the draft survives a sign-in, the sidebar folds away on a phone, and the theme switches.
(function () {
  "use strict";

  var root = document.documentElement;

  // A pushed fragment replaces the element with its id. An appended turn that is already on the
  // page (it came both with the response to the post and through the socket) is not added twice.
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target;
    var fragment = event.detail.fragment;
    var first = fragment.firstElementChild;
    if (first && first.id && first.id !== target.id && document.getElementById(first.id)) {
      event.detail.shouldSwap = false;
      return;
    }
    // The answer being written stays the same element, a live region whose content changes (a region
    // replaced at each delta would not be read out).
    if (first && first.id === target.id && target.matches("[aria-live]")) {
      target.innerHTML = first.innerHTML;
      Array.from(first.attributes).forEach(function (a) { target.setAttribute(a.name, a.value); });
      Array.from(target.attributes).forEach(function (a) {
        if (!first.hasAttribute(a.name)) target.removeAttribute(a.name);
      });
      event.detail.shouldSwap = false;
      return;
    }
    // Expanded delegation panels stay expanded, and collapsed ones collapsed.
    var panels = target.matches("details[id]") ? [target] : Array.from(target.querySelectorAll("details[id]"));
    panels.forEach(function (old) {
      var fresh = fragment.querySelector("#" + CSS.escape(old.id));
      if (fresh) fresh.open = old.open;
    });
  });

  // Scroll: a conversation opens at its latest turn; while an answer streams the page follows its end,
  // unless the user scrolled up, and then "Jump to latest" brings them back.
  var following = true;
  function atEnd() {
    return window.innerHeight + window.scrollY >= root.scrollHeight - 80;
  }
  function toEnd() {
    window.scrollTo(0, root.scrollHeight);
  }
  function jumpButton() {
    return document.getElementById("jump-latest");
  }
  window.addEventListener("scroll", function () {
    following = atEnd();
    var jump = jumpButton();
    if (jump && following) jump.hidden = true;
  }, { passive: true });
  document.addEventListener("click", function (event) {
    if (!event.target.closest("#jump-latest")) return;
    following = true;
    jumpButton().hidden = true;
    toEnd();
  });
  function watchTurns() {
    var turns = document.getElementById("messages");
    if (!turns) return;
    if ("scrollRestoration" in history) history.scrollRestoration = "manual";
    if (turns.querySelector(".turn")) toEnd();
    new MutationObserver(function () {
      if (following) {
        toEnd();
      } else {
        var jump = jumpButton();
        if (jump) jump.hidden = false;
      }
    }).observe(turns, { childList: true, subtree: true, characterData: true });
  }

  // A message sent follows its answer from its end.
  document.addEventListener("htmx:beforeRequest", function (event) {
    if (event.detail.elt.id === "composer") following = true;
  });

  // The draft: kept in this browser per conversation until it is sent, so that it survives a reload,
  // a refusal, or a session that expired (the sign-in page brings the user back to it).
  function draftKey() {
    var chat = document.getElementById("chat");
    return "draft:" + ((chat && chat.dataset.conversation) || "new");
  }
  function store(key, value) {
    try {
      if (value) localStorage.setItem(key, value);
      else localStorage.removeItem(key);
    } catch (e) { /* storage refused (private mode): the draft is just not kept */ }
  }
  document.addEventListener("input", function (event) {
    if (event.target.matches("#composer textarea[name=text]")) store(draftKey(), event.target.value);
  });
  document.addEventListener("sent", function () { store(draftKey(), ""); });
  function words(text) { return text.replace(/\s+/g, " ").trim(); }
  // A draft that is already on the page as a question or a queued message was sent (a page older than the fix
  // that forgets a queued draft kept it): it is forgotten rather than offered to be sent twice.
  function alreadySent(draft) {
    var wanted = words(draft);
    return Array.from(document.querySelectorAll("#queue .queued-text, #messages .turn .question .bubble"))
      .some(function (el) { return words(el.innerText) === wanted; });
  }
  function restoreDraft() {
    var text = document.querySelector("#composer textarea[name=text]");
    if (!text || text.value) return;
    var draft = null;
    try { draft = localStorage.getItem(draftKey()); } catch (e) { draft = null; }
    if (!draft) return;
    if (alreadySent(draft)) store(draftKey(), "");
    else {
      text.value = draft;
      text.dispatchEvent(new Event("input", { bubbles: true }));  // the composer counts, sizes and shows Send for it
    }
  }

  // A message queued during a run shows where the user is looking: its line above the composer, in view.
  document.addEventListener("htmx:oobAfterSwap", function (event) {
    if (event.detail.target.id !== "queue") return;
    var items = event.detail.target.querySelectorAll(".queued-message");
    if (items.length) items[items.length - 1].scrollIntoView({ block: "nearest" });
  });

  // A failure the server could not answer with its form (a server error, no network) is said next to
  // the form, which keeps what was typed.
  function notices() {
    return document.getElementById("connection");
  }
  function notice(elt, text) {
    var form = elt.closest("form");
    var p = document.createElement("p");
    p.className = "error form-notice";
    p.setAttribute("role", "alert");
    p.textContent = text;
    if (form) {
      form.querySelectorAll(".form-notice").forEach(function (old) { old.remove(); });
      form.prepend(p);
    } else {
      var next = elt.nextElementSibling;
      if (next && next.classList.contains("form-notice")) next.remove();
      elt.insertAdjacentElement("afterend", p);
    }
  }
  document.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    // A failed CSRF check answers 403 with a notice addressed to the form (assistant/chat/htmx.py).
    if (xhr.status === 403 && xhr.getResponseHeader("HX-Retarget")) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
      event.detail.target.querySelectorAll(".form-notice").forEach(function (old) { old.remove(); });
    }
  });
  document.addEventListener("htmx:responseError", function (event) {
    var el = notices();
    if (el) notice(event.detail.elt, el.dataset.failed);
  });
  document.addEventListener("htmx:sendError", function (event) {
    var el = notices();
    if (el) notice(event.detail.elt, el.dataset.offline);
  });

  // The live chat's connection.
  function banner(kind) {
    var el = notices();
    if (!el) return;
    if (kind) {
      el.textContent = el.dataset[kind];
      el.hidden = false;
    } else {
      el.hidden = true;
    }
  }
  document.addEventListener("htmx:wsOpen", function () { banner(null); });
  document.addEventListener("htmx:wsClose", function (event) {
    var code = event.detail.event.code;
    if (code === 4410) banner("deleted");
    else if (code === 4401 || code === 4404) banner("refused");
    else if (code !== 1000 && code !== 1001) {
      // Lost: is the server itself out of reach (then nothing may be going on there), or only this connection?
      fetch("/favicon.ico", { method: "HEAD", cache: "no-store" }).then(
        function () { banner("lost"); },
        function () { banner("down"); }
      );
    }
  });

  // The time-zone field: typing a city shows only the zones that match (and picks the first); the browser's
  // zone is offered in one click, and chosen already while the organisation still has the default, UTC.
  function zoneSelect(el) { return document.getElementById(el.dataset.zones); }
  document.addEventListener("input", function (event) {
    var box = event.target.closest(".zone-search");
    if (!box) return;
    var select = zoneSelect(box);
    if (!select) return;
    var words = box.value.trim().toLowerCase().replace(/ /g, "_");
    var first = null;
    select.querySelectorAll("option").forEach(function (option) {
      var match = !words || option.value.toLowerCase().indexOf(words) !== -1;
      option.hidden = !match;
      if (match && !first) first = option;
    });
    select.querySelectorAll("optgroup").forEach(function (group) {
      group.hidden = !group.querySelector("option:not([hidden])");
    });
    if (words && first) select.value = first.value;
  });
  function offerBrowserZone(root) {
    (root || document).querySelectorAll(".zone-browser").forEach(function (button) {
      var select = zoneSelect(button);
      var zone = window.Intl && Intl.DateTimeFormat().resolvedOptions().timeZone;
      var option = select && zone && select.querySelector('option[value="' + zone.replace(/"/g, "") + '"]');
      if (!option) return;
      button.textContent = button.dataset.use.replace("{zone}", zone);
      button.hidden = false;
      if (button.hasAttribute("data-preselect")) select.value = zone;
    });
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest(".zone-browser");
    if (!button) return;
    var select = zoneSelect(button);
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (select) select.value = zone;
  });
  document.addEventListener("DOMContentLoaded", function () { offerBrowserZone(); });
  document.addEventListener("htmx:afterSettle", function () { offerBrowserZone(); });

  // The sidebar, behind its button on a narrow screen.
  document.addEventListener("click", function (event) {
    var button = event.target.closest(".menu-toggle");
    if (!button) return;
    var open = button.getAttribute("aria-expanded") !== "true";
    button.setAttribute("aria-expanded", String(open));
    var panel = document.getElementById(button.getAttribute("aria-controls"));
    if (panel) panel.classList.toggle("open", open);
    if (open && panel) {
      var first = panel.querySelector("a, button");
      if (first) first.focus();
    }
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var button = document.querySelector(".menu-toggle[aria-expanded=true]");
    if (!button) return;
    button.click();
    button.focus();
  });

  // Light or dark: the browser's preference until the user picks, then their pick, in a cookie the
  // server reads to render the next page in it (assistant/chat/theme.py).
  var darkQuery = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  function shownTheme() {
    return root.dataset.theme || (darkQuery && darkQuery.matches ? "dark" : "light");
  }
  function showThemeButton() {
    document.querySelectorAll(".theme-toggle").forEach(function (button) {
      button.setAttribute("aria-pressed", String(shownTheme() === "dark"));
      button.value = shownTheme() === "dark" ? "light" : "dark";
    });
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest(".theme-toggle");
    if (!button) return;
    event.preventDefault();
    var theme = shownTheme() === "dark" ? "light" : "dark";
    root.dataset.theme = theme;
    document.cookie = "theme=" + theme + "; path=/; max-age=31536000; samesite=lax" +
      (location.protocol === "https:" ? "; secure" : "");
    showThemeButton();
  });
  if (darkQuery && darkQuery.addEventListener) darkQuery.addEventListener("change", showThemeButton);

  function start() {
    showThemeButton();
    restoreDraft();
    watchTurns();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
