// From KV Cache to KDA: the website's slider panels (markup written by attnbook.panel_page).
// Each control selects one position; the frame whose data-index matches all positions is shown.
// Also: boxes open for printing.
(function () {
  "use strict";
  function position(control) {
    var range = control.querySelector('input[type="range"]');
    if (range) return Number(range.value);
    var select = control.querySelector("select");
    if (select) return Number(select.value);
    var checked = control.querySelector('input[type="radio"]:checked');
    return checked ? Number(checked.value) : 0;
  }
  function update(panel) {
    var controls = panel.querySelectorAll(".attnlab-control");
    var index = Array.prototype.map.call(controls, position).join(",");
    panel.querySelectorAll(".attnlab-control input[type=range]").forEach(function (range) {
      var shown = JSON.parse(range.dataset.values)[Number(range.value)];
      range.setAttribute("aria-valuetext", shown);
      var readout = range.parentNode.querySelector(".attnlab-readout");
      if (readout) readout.textContent = shown;
    });
    var alt = "";
    panel.querySelectorAll(".attnlab-frame").forEach(function (frame) {
      var on = frame.dataset.index === index;
      frame.hidden = !on;
      if (on) {
        var content = frame.querySelector("img[alt], .attnlab-message");
        alt = content ? (content.alt || content.textContent) : "";
      }
    });
    var status = panel.querySelector(".attnlab-status");
    if (status) status.textContent = alt;
  }
  // Whatever goes wrong is said in the panel (a message above its figure), not only in the
  // console: a reader sees why the figure stopped following the controls.
  function safely(panel) {
    try {
      update(panel);
      var old = panel.querySelector(".attnlab-script-error");
      if (old) old.remove();
    } catch (error) {
      var note = panel.querySelector(".attnlab-script-error");
      if (!note) {
        note = document.createElement("div");
        note.className = "attnlab-message attnlab-script-error";
        note.setAttribute("role", "status");
        panel.insertBefore(note, panel.querySelector(".attnlab-frames"));
      }
      note.textContent = "The sliders stopped working (" + error + "); the figure shows " +
        "the last setting that worked.";
    }
  }
  function wire(panel) {
    panel.addEventListener("input", function () { safely(panel); });
    panel.addEventListener("change", function () { safely(panel); });
    safely(panel);  // a browser may restore control positions on reload
  }
  function start() { document.querySelectorAll(".attnlab-static").forEach(wire); }
  // Printing: open the solutions and "going deeper" boxes (not the folded code cells), and
  // close again afterwards the ones the reader had closed.
  var openedForPrint = [];
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details:not(.above-input):not(.below-input)")
      .forEach(function (box) {
        if (!box.open) { box.open = true; openedForPrint.push(box); }
      });
  });
  window.addEventListener("afterprint", function () {
    openedForPrint.forEach(function (box) { box.open = false; });
    openedForPrint = [];
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
