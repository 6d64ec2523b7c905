// The memory browser's one script, and it is optional: every page works without it.
// "/" focuses the search box from anywhere that is not a text field.
document.addEventListener("keydown", function (event) {
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
  var target = event.target;
  if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
  var box = document.getElementById("q");
  if (!box) { window.location.href = "/ui/memories"; return; }
  event.preventDefault();
  box.focus();
  box.select();
});
