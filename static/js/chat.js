// The live chat's few behaviours htmx does not have: pushes are idempotent, panels stay as the
// user left them, the page follows the answer, and a lost connection says so in plain words.
(function () {
  "use strict";

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
    // Expanded delegation panels stay expanded, and collapsed ones collapsed.
    var panels = target.matches("details[id]") ? [target] : Array.from(target.querySelectorAll("details[id]"));
    panels.forEach(function (old) {
      var fresh = fragment.querySelector("#" + CSS.escape(old.id));
      if (fresh) fresh.open = old.open;
    });
  });

  var followBottom = false;
  function nearBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
  }
  document.addEventListener("htmx:wsBeforeMessage", function () { followBottom = nearBottom(); });
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (followBottom) window.scrollTo(0, document.body.scrollHeight);
  });

  function banner(kind) {
    var el = document.getElementById("connection");
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
    else if (code !== 1000 && code !== 1001) banner("lost");
  });
  document.addEventListener("htmx:responseError", function () { banner("failed"); });
  document.addEventListener("htmx:sendError", function () { banner("offline"); });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful) banner(null);
  });
})();
