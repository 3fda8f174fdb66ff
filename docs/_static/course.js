/* The course site: the little the theme does not do (tools/site.py, docs/conf.py).
 * - A picture shown smaller than its size opens at full size on click (or Enter), in a dialog.
 * - A box that scrolls sideways can be reached with the keyboard (tabindex), as axe asks.
 * - The search button says what it is to a screen reader.
 */
(function () {
  "use strict";

  function zoom(img) {
    const dialog = document.createElement("dialog");
    dialog.className = "course-zoom";
    dialog.setAttribute("aria-label", "Full size: " + (img.alt || "picture"));
    const close = document.createElement("button");
    close.type = "button";
    close.className = "btn btn-sm btn-secondary";
    close.textContent = "Close (Esc)";
    const full = document.createElement("img");
    full.src = img.currentSrc || img.src;
    full.alt = img.alt;
    full.width = shownWidth(img);
    dialog.append(close, full);
    document.body.append(dialog);
    const done = () => dialog.close();
    close.addEventListener("click", done);
    full.addEventListener("click", done);
    dialog.addEventListener("close", () => {
      dialog.remove();
      img.focus();
    });
    dialog.showModal();
    close.focus();
  }

  // The width a picture is meant to be shown at: its width attribute (a figure has twice as
  // many pixels, to be sharp on a high-density screen), else its own width in pixels.
  function shownWidth(img) {
    return Number(img.getAttribute("width")) || img.naturalWidth;
  }

  function markZoomable(img) {
    const shrunk = shownWidth(img) > Math.ceil(img.getBoundingClientRect().width) + 1;
    img.classList.toggle("course-zoomable", shrunk);
    if (shrunk && !img.hasAttribute("tabindex")) {
      img.tabIndex = 0;
      img.setAttribute("role", "button");
      img.title = "Open full size";
    } else if (!shrunk && img.getAttribute("role") === "button") {
      img.removeAttribute("tabindex");
      img.removeAttribute("role");
      img.removeAttribute("title");
    }
  }

  function pictures() {
    for (const img of document.querySelectorAll(".bd-article .cell_output img")) {
      if (img.complete) markZoomable(img);
      else img.addEventListener("load", () => markZoomable(img));
      if (img.dataset.courseZoom) continue;
      img.dataset.courseZoom = "1";
      img.addEventListener("click", () => img.classList.contains("course-zoomable") && zoom(img));
      img.addEventListener("keydown", (event) => {
        if ((event.key === "Enter" || event.key === " ") && img.classList.contains("course-zoomable")) {
          event.preventDefault();
          zoom(img);
        }
      });
    }
  }

  function scrollersFocusable() {
    const boxes = document.querySelectorAll(
      ".bd-article pre, .bd-article .pst-scrollable-table-container, .bd-article mjx-container, .bd-article div.cell_output .output"
    );
    for (const box of boxes) {
      if (box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1) {
        if (!box.hasAttribute("tabindex")) box.tabIndex = 0;
      }
    }
  }

  function searchButtonNamed() {
    for (const button of document.querySelectorAll(".search-button__button, button.search-button")) {
      if (!button.getAttribute("aria-label")) button.setAttribute("aria-label", "Search");
    }
  }

  function ready() {
    pictures();
    scrollersFocusable();
    searchButtonNamed();
    window.addEventListener("resize", () => {
      pictures();
      scrollersFocusable();
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
  window.addEventListener("load", scrollersFocusable); // after MathJax has typeset
})();
