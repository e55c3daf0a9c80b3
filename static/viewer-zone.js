// The viewer's time zone, so pages can show times on the viewer's own clock: kept in a
// cookie the server reads (`app/web/viewer_zone.py`), copied into the hidden `viewer_zone`
// field of forms, and, on a page that had to guess it (UTC), the page shown once more on
// the viewer's own clock.
(function () {
  "use strict";
  var zone = "";
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch (e) {
    return;
  }
  if (!zone) {
    return;
  }
  var cookie = "sundial_zone=" + encodeURIComponent(zone);
  if (document.cookie.split("; ").indexOf(cookie) === -1) {
    document.cookie = cookie + "; path=/; max-age=31536000; samesite=lax";
  }
  function fill(root) {
    root.querySelectorAll('input[name="viewer_zone"]').forEach(function (input) {
      input.value = zone;
    });
    // A new schedule's zone field starts at the viewer's zone, unless already changed.
    root.querySelectorAll("input[data-zone-default]").forEach(function (input) {
      if (input.value === input.getAttribute("data-zone-default")) {
        input.value = zone;
        input.setAttribute("data-zone-default", zone);
      }
    });
  }
  fill(document);
  document.addEventListener("htmx:load", function (event) {
    fill(event.target);
  });
  var guessed = document.querySelector("[data-guess-zone]");
  if (guessed && zone !== "UTC" && guessed.value !== zone) {
    var url = new URL(window.location.href);
    url.searchParams.set("zone", zone);
    window.location.replace(url.toString());
  }
})();
