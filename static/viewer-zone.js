// The viewer's time zone, so pages can show times on the viewer's own clock: kept in a
// cookie for page loads and copied into the hidden `viewer_zone` field of forms.
(function () {
  "use strict";
  var zone;
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  } catch (e) {
    return;
  }
  if (!zone) {
    return;
  }
  var cookie = "sundial_tz=" + encodeURIComponent(zone);
  if (document.cookie.split("; ").indexOf(cookie) === -1) {
    document.cookie = cookie + "; path=/; max-age=31536000; samesite=lax";
  }
  function fill(root) {
    root.querySelectorAll('input[name="viewer_zone"]').forEach(function (input) {
      input.value = zone;
    });
  }
  fill(document);
  document.addEventListener("htmx:load", function (event) {
    fill(event.target);
  });
})();
