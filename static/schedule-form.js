// The schedule editor shows only the fields of the chosen preset. Without this script
// every field shows, and the server ignores those the preset does not use.
(function () {
  "use strict";
  function update(form) {
    var preset = form.querySelector("#preset");
    if (!preset) {
      return;
    }
    form.querySelectorAll("[data-presets]").forEach(function (field) {
      var wanted = field.getAttribute("data-presets").split(" ");
      field.hidden = wanted.indexOf(preset.value) === -1;
    });
  }
  function setUp(root) {
    var form = root.querySelector ? root.querySelector("#schedule-form") : null;
    if (!form && root.id === "schedule-form") {
      form = root;
    }
    if (!form || form.dataset.presetsReady) {
      return;
    }
    form.dataset.presetsReady = "yes";
    form.addEventListener("change", function () {
      update(form);
    });
    update(form);
  }
  setUp(document);
  document.addEventListener("htmx:load", function (event) {
    setUp(event.target);
  });
})();
