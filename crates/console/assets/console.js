// imagegate console: the copy buttons, and forms sent once. Everything else works without JavaScript.
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

// A form marked data-submit-once is sent once: a double-click on "Create key" would otherwise
// create two keys and show only the second (the page of the first is replaced before it shows).
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (!form.hasAttribute("data-submit-once")) return;
  if (form.getAttribute("data-submitted") === "1") {
    event.preventDefault();
    return;
  }
  form.setAttribute("data-submitted", "1");
});

// A page the back button restores comes back as it was left: its forms may be sent again.
window.addEventListener("pageshow", function () {
  var sent = document.querySelectorAll("form[data-submitted]");
  for (var i = 0; i < sent.length; i++) sent[i].removeAttribute("data-submitted");
});
