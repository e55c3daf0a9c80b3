// Tells Sundial the viewer's time zone (a cookie the server reads), and on a page that had
// to guess it (UTC), shows the page once more on the viewer's own clock.
(function () {
  var zone = "";
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { return; }
  if (!zone) { return; }
  document.cookie = "sundial_zone=" + encodeURIComponent(zone) + "; path=/; SameSite=Lax; max-age=31536000";
  var guessed = document.querySelector("[data-guess-zone]");
  if (guessed && zone !== "UTC" && guessed.value !== zone) {
    var url = new URL(window.location.href);
    url.searchParams.set("zone", zone);
    window.location.replace(url.toString());
  }
})();
