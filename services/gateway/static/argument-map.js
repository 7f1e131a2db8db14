// Pan and zoom for the case page's argument map (templates/case_map.html), served by the gateway itself under
// the page's Content-Security-Policy (script-src 'self'). Without it the map is a plain scrollable drawing at
// its natural size. With it: zoom buttons; with the map selected, + − 0 and the arrow keys; Ctrl (or ⌘) +
// wheel zooms about the pointer while a plain wheel scrolls; dragging pans; the map opens with its centre
// (the focused claim or the verdict) in view; the full text of the node under the pointer or keyboard focus
// is shown below the map.
(function () {
  "use strict";
  var view = document.getElementById("map-view");
  var svg = view && view.querySelector("svg.argument-map");
  if (!svg) {
    return;
  }
  var tools = document.getElementById("map-tools");
  var readout = document.getElementById("map-zoom");
  var detail = document.getElementById("map-detail");
  var natural = { w: parseFloat(svg.getAttribute("width")), h: parseFloat(svg.getAttribute("height")) };
  var MIN = 0.2, MAX = 4, STEP = 1.25, PAN = 80;
  var scale = 1;

  // Zoom to `next`, keeping the drawing's point under (clientX, clientY) — the view's middle by default — still.
  function zoomTo(next, clientX, clientY) {
    next = Math.min(MAX, Math.max(MIN, next));
    var box = view.getBoundingClientRect();
    var px = clientX === undefined ? view.clientWidth / 2 : clientX - box.left - view.clientLeft;
    var py = clientY === undefined ? view.clientHeight / 2 : clientY - box.top - view.clientTop;
    var x = (view.scrollLeft + px) / scale, y = (view.scrollTop + py) / scale;
    scale = next;
    svg.setAttribute("width", String(natural.w * scale));
    svg.setAttribute("height", String(natural.h * scale));
    view.scrollLeft = x * scale - px;
    view.scrollTop = y * scale - py;
    readout.textContent = Math.round(scale * 100) + "%";
    view.setAttribute("data-zoom", String(scale));
  }

  tools.hidden = false;
  view.classList.add("pannable");
  tools.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-zoom]");
    if (!button) {
      return;
    }
    var how = button.getAttribute("data-zoom");
    zoomTo(how === "in" ? scale * STEP : how === "out" ? scale / STEP : 1);
  });

  view.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    switch (event.key) {
      case "+": case "=": zoomTo(scale * STEP); break;
      case "-": case "_": zoomTo(scale / STEP); break;
      case "0": zoomTo(1); break;
      case "ArrowLeft": view.scrollLeft -= PAN; break;
      case "ArrowRight": view.scrollLeft += PAN; break;
      case "ArrowUp": view.scrollTop -= PAN; break;
      case "ArrowDown": view.scrollTop += PAN; break;
      default: return;
    }
    event.preventDefault();
  });

  view.addEventListener("wheel", function (event) {
    if (!event.ctrlKey && !event.metaKey) {
      return; // a plain wheel scrolls the view: it pans
    }
    event.preventDefault();
    var dy = event.deltaMode === 1 ? event.deltaY * 16 : event.deltaY;
    zoomTo(scale * Math.exp(-dy / 300), event.clientX, event.clientY);
  }, { passive: false });

  // Dragging pans; a drag that ends on a link does not follow it.
  var drag = null, dragged = false;
  view.addEventListener("pointerdown", function (event) {
    if (event.button !== 0 || event.pointerType === "touch") {
      return; // touch scrolls the view natively
    }
    drag = { id: event.pointerId, x: event.clientX, y: event.clientY, left: view.scrollLeft, top: view.scrollTop };
    dragged = false;
  });
  view.addEventListener("pointermove", function (event) {
    if (!drag || event.pointerId !== drag.id) {
      return;
    }
    var dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    if (!dragged && Math.abs(dx) + Math.abs(dy) < 5) {
      return;
    }
    if (!dragged) {
      dragged = true;
      view.setPointerCapture(event.pointerId);
      view.classList.add("dragging");
    }
    view.scrollLeft = drag.left - dx;
    view.scrollTop = drag.top - dy;
  });
  function endDrag() {
    drag = null;
    view.classList.remove("dragging");
  }
  view.addEventListener("pointerup", endDrag);
  view.addEventListener("pointercancel", endDrag);
  view.addEventListener("click", function (event) {
    if (dragged) {
      event.preventDefault();
      event.stopPropagation();
      dragged = false;
    }
  }, true);
  view.addEventListener("dragstart", function (event) {
    event.preventDefault();
  });

  // A label cut to fit its box is whole in the node's title: shown here on hover and on keyboard focus.
  function show(event) {
    var node = event.target.closest ? event.target.closest("a.map-node") : null;
    var title = node && node.querySelector("title");
    if (title) {
      detail.textContent = title.textContent;
      detail.hidden = false;
    }
  }
  view.addEventListener("pointerover", show);
  view.addEventListener("focusin", show);

  // Open with the map's centre in view: the focused claim, else the verdict.
  var centre = (svg.getAttribute("data-centre") || "").split(" ").filter(Boolean)[0];
  var anchor = centre ? svg.querySelector('a.map-node[data-node="' + CSS.escape(centre) + '"] rect')
    : svg.querySelector('a.map-node[data-kind="verdict"] rect');
  if (anchor) {
    var at = anchor.getBoundingClientRect(), frame = view.getBoundingClientRect();
    view.scrollLeft += at.left + at.width / 2 - (frame.left + view.clientWidth / 2);
    view.scrollTop += at.top - frame.top - 24;
  }
}());
