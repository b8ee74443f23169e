// The little htmx cannot do: toasts for failed requests, copy buttons, dismissing
// toasts, select-all for bulk forms, and keyboard shortcuts. No framework, no build step.
(function () {
  "use strict";
  // Phones fold the nav behind a Menu button (only once this script runs: without
  // JavaScript the nav stays open).
  document.documentElement.classList.add("js");
  document.addEventListener("click", function (event) {
    const toggle = event.target.closest(".menu-toggle");
    if (!toggle) return;
    const bar = toggle.closest(".topbar");
    const open = bar.classList.toggle("nav-open");
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
  });

  const TOAST_MS = 6000;

  function toastsRegion() {
    return document.getElementById("toasts");
  }

  function armToasts(root) {
    (root || document).querySelectorAll(".toast:not([data-armed])").forEach(function (toast) {
      toast.setAttribute("data-armed", "");
      // Errors stay until dismissed; the rest fade after a few seconds, except a toast
      // that follows its job (data-follows): it stays until the server says how the job
      // ended, and that answer replaces it (reviews/toasts.py).
      if (!toast.classList.contains("error") && !toast.hasAttribute("data-follows")) {
        setTimeout(function () { toast.remove(); }, TOAST_MS);
      }
    });
  }

  function showToast(text, level) {
    const region = toastsRegion();
    if (!region) return;
    const toast = document.createElement("div");
    toast.className = "toast " + (level || "info");
    toast.setAttribute("role", level === "error" ? "alert" : "status");
    const span = document.createElement("span");
    span.textContent = text;
    const close = document.createElement("button");
    close.type = "button";
    close.className = "toast-close";
    close.setAttribute("aria-label", "Dismiss");
    close.textContent = "×";
    toast.append(span, close);
    region.append(toast);
    armToasts(region);
  }

  const FAILURES = {
    400: "The server could not read that request.",
    403: "That is not allowed here. Reload the page and try again.",
    404: "Not found: it may have been removed, or belong to another workspace.",
    405: "That action is not allowed here.",
  };

  document.addEventListener("htmx:responseError", function (event) {
    const status = event.detail.xhr.status;
    // The server says what happened (stale security token, role) in X-Cairn-Message.
    const message = event.detail.xhr.getResponseHeader("X-Cairn-Message") || FAILURES[status] || "Something went wrong (" + status + "). Nothing was changed; try again.";
    showToast(message, "error");
  });
  document.addEventListener("htmx:sendError", function () {
    showToast("Cannot reach the server. Check your connection and try again.", "error");
  });
  // Bulk selection: a checkbox with data-check-all="<selector>" ticks every checkbox
  // the selector matches; data-checked-count="<selector>" says how many are ticked.
  function syncChecks() {
    document.querySelectorAll("[data-checked-count]").forEach(function (out) {
      const ticked = document.querySelectorAll(out.getAttribute("data-checked-count") + ":checked");
      out.textContent = ticked.length + " selected";
    });
    document.querySelectorAll("[data-check-all]").forEach(function (all) {
      const boxes = Array.from(document.querySelectorAll(all.getAttribute("data-check-all")));
      const ticked = boxes.filter(function (box) { return box.checked; }).length;
      all.checked = boxes.length > 0 && ticked === boxes.length;
      all.indeterminate = ticked > 0 && ticked < boxes.length;
    });
  }
  document.addEventListener("change", function (event) {
    const all = event.target.closest("[data-check-all]");
    if (all) {
      document.querySelectorAll(all.getAttribute("data-check-all")).forEach(function (box) {
        box.checked = all.checked;
      });
    }
    if (event.target.matches("input[type=checkbox]")) syncChecks();
  });

  // A typed reason survives a login: it is kept in this tab's sessionStorage (keyed by
  // the form's action) while typed, put back when the form is on a page again, and
  // forgotten once the server has accepted the form.
  const DRAFT = "cairn-reason:";
  document.addEventListener("input", function (event) {
    const field = event.target;
    if (!field.matches || !field.matches("form[action] input[name=reason]")) return;
    try { sessionStorage.setItem(DRAFT + field.form.getAttribute("action"), field.value); } catch (e) { /* storage off */ }
  });
  function restoreDrafts() {
    document.querySelectorAll("form[action] input[name=reason]").forEach(function (field) {
      let saved = null;
      try { saved = sessionStorage.getItem(DRAFT + field.form.getAttribute("action")); } catch (e) { return; }
      if (!saved || field.value) return;
      field.value = saved;
      const details = field.closest("details");
      if (details) details.open = true;
    });
  }
  document.addEventListener("htmx:afterRequest", function (event) {
    const form = event.detail.elt && event.detail.elt.closest && event.detail.elt.closest("form[action]");
    const xhr = event.detail.xhr;
    if (!form || !xhr || xhr.status >= 300 || xhr.getResponseHeader("HX-Redirect")) return;
    try { sessionStorage.removeItem(DRAFT + form.getAttribute("action")); } catch (e) { /* storage off */ }
  });
  document.addEventListener("submit", function (event) {
    // A plain (non-htmx) form leaves the page: keep the draft until the answer shows
    // the form is gone (then nothing restores it) or a login brings it back.
    const form = event.target;
    if (form.hasAttribute("hx-post")) return;
    const field = form.querySelector("input[name=reason]");
    if (field) { try { sessionStorage.setItem(DRAFT + form.getAttribute("action"), field.value); } catch (e) { /* storage off */ } }
  });
  document.addEventListener("DOMContentLoaded", restoreDrafts);

  document.addEventListener("htmx:afterSettle", function () { armToasts(); syncChecks(); });
  document.addEventListener("htmx:oobAfterSwap", function () { armToasts(); });
  document.addEventListener("DOMContentLoaded", function () { armToasts(); syncChecks(); });

  document.addEventListener("click", function (event) {
    const close = event.target.closest(".toast-close");
    if (close) {
      close.closest(".toast").remove();
      return;
    }
    const copy = event.target.closest("[data-copy]");
    if (copy) {
      const source = document.querySelector(copy.getAttribute("data-copy"));
      if (!source) return;
      const done = function () {
        copy.textContent = "Copied";
        copy.classList.add("copied");
      };
      // An input is selected as it is; a <pre> or <code> (an install line, a password)
      // is copied by its text.
      const text = "value" in source ? source.value : source.textContent;
      if (source.select) {
        source.select();
      } else {
        const range = document.createRange();
        range.selectNodeContents(source);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
      }
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () {
          document.execCommand("copy") && done();
        });
      } else if (document.execCommand("copy")) {
        done();
      }
    }
  });
  document.addEventListener("focusin", function (event) {
    if (event.target.matches("[data-select-all]")) event.target.select();
  });

  // Keyboard shortcuts: "?" help, "/" filter, "g" then a letter to go somewhere.
  let pendingG = false;
  function typing(target) {
    return target.closest("input, textarea, select, [contenteditable=true]");
  }
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      // Escape closes an open confirm-with-reason form and returns focus to its button.
      const open = document.activeElement && document.activeElement.closest("details.confirm[open]");
      if (open) {
        open.open = false;
        open.querySelector("summary").focus();
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    const help = document.getElementById("shortcuts");
    if (event.key === "?") {
      if (help && !help.open) help.showModal();
      event.preventDefault();
    } else if (event.key === "/") {
      const filter = document.querySelector("[data-filter]");
      if (filter) {
        filter.focus();
        event.preventDefault();
      }
    } else if (pendingG) {
      pendingG = false;
      const link = document.querySelector('#nav a[data-key="' + event.key + '"]');
      if (link) link.click();
    } else if (event.key === "g") {
      pendingG = true;
      setTimeout(function () { pendingG = false; }, 1200);
    }
  });
})();

// Scope pickers (export and erasure forms): show only the fields the chosen kind
// uses. Without JavaScript every field shows and the server ignores the others.
(function () {
  "use strict";
  function sync(select) {
    const form = select.closest("form");
    if (!form) return;
    form.querySelectorAll("[data-when]").forEach(function (field) {
      field.hidden = field.dataset.when.split(" ").indexOf(select.value) === -1;
    });
    // The value's placeholder follows the kind: a real example of it where there is one.
    const option = select.selectedOptions[0];
    form.querySelectorAll('[data-placeholder-from="' + select.id + '"]').forEach(function (input) {
      if (option && option.dataset.placeholder !== undefined) input.placeholder = option.dataset.placeholder;
    });
  }
  function syncAll(root) {
    root.querySelectorAll("select[data-scope]").forEach(sync);
  }
  document.addEventListener("change", function (event) {
    if (event.target.matches && event.target.matches("select[data-scope]")) sync(event.target);
  });
  document.addEventListener("DOMContentLoaded", function () { syncAll(document); });
  document.addEventListener("htmx:afterSettle", function (event) { syncAll(event.target); });
})();

// A page answering a POST that must not be sent twice (Members' Add: a reload would
// add again, or fail as "already a member"): the address bar becomes the page's GET
// address, so a reload asks for the page instead of re-posting the form. Not a
// redirect: the one-time password lives in this answer only, never in the session.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    const marked = document.querySelector("[data-replace-url]");
    if (marked && window.history.replaceState) {
      window.history.replaceState(null, "", marked.dataset.replaceUrl);
    }
  });
})();
