// Workflow editor: keep each "Runs after" choice labelled with the step's name as it is
// typed. The choices point at steps by position, so only their words need to follow.
document.addEventListener("input", (event) => {
  const input = event.target;
  if (!(input instanceof HTMLInputElement) || input.name !== "step_name") return;
  const index = input.dataset.stepIndex;
  const text = input.value.trim() || `step ${Number(index) + 1}`;
  for (const label of document.querySelectorAll(`[data-step-label="${index}"]`)) {
    label.textContent = text;
  }
});
