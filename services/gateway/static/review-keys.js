// Deciding on a proposal from the keyboard (the page's form works without it): j/k move between the items
// still to decide, a/r/d/l choose accept, reject, reject as a duplicate of the record named beside it, or later;
// n writes the note; Ctrl+Enter (or Cmd+Enter) records the decision; Escape leaves a text box.
// Served by the gateway itself (script-src 'self'): no inline script, no CDN.
(function () {
  "use strict";
  var form = document.getElementById("decide");
  if (!form) { return; }
  var items = Array.prototype.slice.call(form.querySelectorAll("article.item")).filter(function (item) {
    return item.querySelector("fieldset.choice");
  });
  var current = -1;

  function select(index) {
    if (!items.length) { return; }
    index = Math.max(0, Math.min(items.length - 1, index));
    if (current >= 0) { items[current].classList.remove("current"); items[current].removeAttribute("aria-current"); }
    current = index;
    var item = items[current];
    item.classList.add("current");
    item.setAttribute("aria-current", "true");
    item.setAttribute("tabindex", "-1");
    item.focus({ preventScroll: true });
    item.scrollIntoView({ block: "nearest" });
  }

  function choose(key) {
    if (current < 0) { select(0); }
    var radio = items[current].querySelector("input[type=radio][data-key='" + key + "']");
    if (!radio || radio.disabled) { return false; }
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    if (key === "d") {
      var box = items[current].querySelector("input.duplicate-of");
      if (box && !box.value) { box.focus(); return true; }
    }
    if (key !== "l" && current < items.length - 1) { select(current + 1); }
    return true;
  }

  function typing(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" && target.type === "text" || tag === "TEXTAREA" || tag === "SELECT";
  }

  document.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit ? form.requestSubmit() : form.submit();
      return;
    }
    if (event.key === "Escape" && typing(event.target)) { event.target.blur(); return; }
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    var handled = true;
    switch (event.key) {
      case "j": select(current + 1); break;
      case "k": select(current - 1); break;
      case "a": case "r": case "d": case "l": handled = choose(event.key); break;
      case "n": var note = document.getElementById("note"); if (note) { note.focus(); } break;
      default: handled = false;
    }
    if (handled) { event.preventDefault(); }
  });

  // A duplicate-of box filled in chooses "duplicate" for its item.
  form.addEventListener("input", function (event) {
    if (event.target.classList && event.target.classList.contains("duplicate-of") && event.target.value) {
      var radio = event.target.closest("fieldset").querySelector("input[type=radio][value=duplicate]");
      if (radio) { radio.checked = true; }
    }
  });

  select(0);
}());
