// The runs page's ticks for acting on many runs: kept while the table refreshes itself
// (live updates replace it), "tick every run on this page", and how many are ticked.
(function () {
  "use strict";
  var ticked = new Set();
  var scopeChosen = false; // once a person picks "which runs", ticking no longer picks it
  function boxes() {
    return document.querySelectorAll('input[type="checkbox"][name="run"][form="bulk-form"]');
  }
  function show() {
    var count = document.getElementById("ticked-count");
    var n = 0;
    boxes().forEach(function (box) {
      if (box.checked) { n += 1; }
    });
    if (count) { count.textContent = String(n); }
    var scope = document.querySelector('#bulk-form input[name="scope"][value="ticked"]');
    if (scope && n > 0 && !scopeChosen) { scope.checked = true; }
  }
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.name === "scope") { scopeChosen = true; }
    if (target.id === "select-page") {
      boxes().forEach(function (box) {
        box.checked = target.checked;
        if (target.checked) { ticked.add(box.value); } else { ticked.delete(box.value); }
      });
    } else if (target.matches('input[name="run"][form="bulk-form"]')) {
      if (target.checked) { ticked.add(target.value); } else { ticked.delete(target.value); }
    }
    show();
  });
  document.addEventListener("htmx:afterSwap", function () {
    boxes().forEach(function (box) { box.checked = ticked.has(box.value); });
    show();
  });
})();
