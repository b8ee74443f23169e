// Review queues at keyboard speed: j/k move between cards, a/r open the card's
// approve (confirm, re-approve) or reject (discard) form, and after an action the
// focus lands on the next card instead of falling back to <body>.
// Also: selects marked data-autosubmit submit their form (no inline handlers, so a
// Content-Security-Policy of script-src 'self' holds).
(function () {
  "use strict";

  const CARD = "article.delta[data-card]";
  let lastKeyWasG = false;

  function cards() {
    return Array.from(document.querySelectorAll(CARD));
  }

  function currentCard() {
    const active = document.activeElement;
    const inside = active && active.closest ? active.closest(CARD) : null;
    return inside || document.querySelector(CARD + ".current");
  }

  function select(card) {
    if (!card) return;
    document.querySelectorAll(CARD + ".current").forEach(function (c) { c.classList.remove("current"); });
    card.classList.add("current");
    card.focus({ preventScroll: true });
    card.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    const all = cards();
    if (!all.length) return;
    const index = all.indexOf(currentCard());
    const next = index === -1 ? (step > 0 ? 0 : all.length - 1) : index + step;
    select(all[Math.max(0, Math.min(all.length - 1, next))]);
  }

  function openForm(action) {
    const card = currentCard() || cards()[0];
    if (!card) return false;
    const form = card.querySelector('details.confirm[data-key-action="' + action + '"]');
    if (!form) return false;
    form.open = true;
    const field = form.querySelector("input:not([type=hidden]):not([type=checkbox]), input[type=checkbox]");
    const reason = form.querySelector("input[name=reason]");
    (reason || field || form.querySelector("summary")).focus();
    return true;
  }

  function typing(target) {
    return target.closest && target.closest("input, textarea, select, [contenteditable=true]");
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    if (document.querySelector("dialog[open]")) return;
    const afterG = lastKeyWasG;
    lastKeyWasG = event.key === "g";
    if (afterG) return; // "g a" goes to the audit log: cairn.js handles it
    if (event.key === "j") { move(1); event.preventDefault(); }
    else if (event.key === "k") { move(-1); event.preventDefault(); }
    else if (event.key === "a") { if (openForm("approve")) event.preventDefault(); }
    else if (event.key === "r") { if (openForm("reject")) event.preventDefault(); }
  });

  // Focus after an action: remember the card that follows the one acted on.
  let nextId = null;
  document.addEventListener("htmx:beforeSwap", function (event) {
    const target = event.detail.target;
    if (!target || !target.matches || !target.matches(CARD)) return;
    if (event.detail.xhr.status !== 200) return; // a refusal re-renders the card: stay there
    const all = cards();
    const index = all.indexOf(target);
    const next = all[index + 1] || all[index - 1];
    nextId = next ? next.id : null;
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!nextId) return;
    const still = document.getElementById(nextId);
    nextId = null;
    if (still) select(still);
  });

  document.addEventListener("change", function (event) {
    const select = event.target;
    if (select.matches && select.matches("select[data-autosubmit]") && select.form) {
      select.form.submit();
    }
  });
})();
