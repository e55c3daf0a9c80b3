// A live region (an element that refreshes itself with hx-get when the server says its topic
// changed) replaces itself with the answer. A change heard while its refresh is in flight is
// queued by htmx on that element, and so lost with it when the answer replaces it: the page
// would go on showing the state before that change until the next one. Here such a region
// fetches once more, from its replacement.
(function () {
  "use strict";
  var inFlight = new WeakSet();
  var missed = new WeakSet();
  document.addEventListener("htmx:beforeRequest", function (event) {
    inFlight.add(event.detail.elt);
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    inFlight.delete(event.detail.elt);
  });
  document.addEventListener("htmx:confirm", function (event) {
    // Only reads are fetched again: a form sent twice is htmx's to refuse.
    if (event.detail.verb === "get" && inFlight.has(event.detail.elt)) {
      missed.add(event.detail.elt);
    }
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    var old = event.detail.requestConfig && event.detail.requestConfig.elt;
    var fresh = event.target;
    if (!old || old.isConnected || !missed.has(old) || !fresh.getAttribute) {
      return; // still in the page, htmx sends the queued refresh itself
    }
    var path = fresh.getAttribute("hx-get");
    if (path) {
      missed.delete(old);
      htmx.ajax("GET", path, { source: fresh });
    }
  });
})();
