// From KV Cache to KDA: a display equation wider than the column scrolls sideways; make each such
// equation reachable by keyboard (tabindex) so it can be scrolled without a mouse (WCAG 2.1.1).
// Punctuation right after an inline formula stays on the formula's line, so that no line starts
// with "。" or "，" (the browser may break between a formula and the text after it).
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
  var CLOSING = /^[\u3001\u3002\uff0c\uff1b\uff1a\uff01\uff1f\uff09\u300d\u300f\u201d\u2019.,;:!?)\]]+/;
  function keepPunctuationWithFormulas() {
    document.querySelectorAll('mjx-container:not([display="true"])').forEach(function (eq) {
      var next = eq.nextSibling, match = next && next.nodeType === 3 && CLOSING.exec(next.data);
      if (!match) return;
      var keep = document.createElement("span");
      keep.className = "attnlab-nobreak";
      eq.parentNode.insertBefore(keep, eq);
      keep.appendChild(eq);
      keep.appendChild(document.createTextNode(match[0]));
      next.data = next.data.slice(match[0].length);
    });
  }
  function whenTypeset() {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(function () {
        keepPunctuationWithFormulas();
        markScrollable();
      });
    }
  }
  window.addEventListener("load", whenTypeset);
  window.addEventListener("resize", markScrollable);
})();
