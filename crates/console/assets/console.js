// imagegate console: the copy buttons. Everything else works without JavaScript.
"use strict";
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-copy]");
  if (!button) return;
  var source = document.getElementById(button.getAttribute("data-copy"));
  if (!source) return;
  var text = source.textContent;
  var label = button.textContent;
  function done(ok) {
    button.textContent = ok ? "Copied" : "Select and copy";
    button.setAttribute("aria-live", "polite");
    setTimeout(function () { button.textContent = label; }, 2000);
  }
  function fallback() {
    var range = document.createRange();
    range.selectNodeContents(source);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    done(ok);
  }
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(function () { done(true); }, fallback);
  } else {
    fallback();
  }
});
