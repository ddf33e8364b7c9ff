// From KV Cache to KDA: a display equation wider than the column scrolls sideways; make each such
// equation reachable by keyboard (tabindex) so it can be scrolled without a mouse (WCAG 2.1.1).
(function () {
  "use strict";
  function markScrollable() {
    document.querySelectorAll('mjx-container[display="true"]').forEach(function (eq) {
      if (eq.scrollWidth > eq.clientWidth + 1) {
        eq.setAttribute("tabindex", "0");
      } else {
        eq.removeAttribute("tabindex");
      }
    });
  }
  function whenTypeset() {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(markScrollable);
    }
  }
  window.addEventListener("load", whenTypeset);
  window.addEventListener("resize", markScrollable);
})();
