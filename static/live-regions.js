// A live region (an element that refreshes itself with hx-get when the server says its topic
// changed) replaces itself with the answer. A change heard while its refresh is in flight is
// lost with it: htmx queues that refresh on the element the answer replaces, or a throttle
// drops it. The page would go on showing the state before that change until the next one.
// Here such a region fetches once more, from its replacement.
(function () {
  "use strict";
  var answering = new WeakMap(); // element -> the live update its refresh in flight answers
  var missed = new WeakSet();
  document.addEventListener("htmx:beforeRequest", function (event) {
    var cause = event.detail.requestConfig && event.detail.requestConfig.triggeringEvent;
    answering.set(event.detail.elt, cause ? cause.detail : null);
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    answering.delete(event.detail.elt);
  });
  // Every live update, throttled or not (a throttle drops it before any request is asked),
  // heard after the refresh it may have started itself.
  document.addEventListener("htmx:sseMessage", function (event) {
    var elt = event.target;
    if (answering.has(elt) && answering.get(elt) !== event.detail) {
      missed.add(elt);
    }
  });
  document.addEventListener("htmx:confirm", function (event) {
    // Only reads are fetched again: a form sent twice is htmx's to refuse.
    if (event.detail.verb === "get" && answering.has(event.detail.elt)) {
      missed.add(event.detail.elt);
    }
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    var old = event.detail.requestConfig && event.detail.requestConfig.elt;
    var fresh = event.target;
    if (!old || old.isConnected || !missed.has(old) || !fresh.getAttribute) {
      return; // still in the page: a refresh queued on it goes ahead
    }
    var path = fresh.getAttribute("hx-get");
    if (path) {
      missed.delete(old);
      htmx.ajax("GET", path, { source: fresh });
    }
  });
})();
