// The memory browser's one script, and it is optional: every page works without it.
// "/" focuses the search box from anywhere that is not a text field; on a page without one
// it opens the memory list with its search box focused (the #q address).
function focusSearch() {
  var box = document.getElementById("q");
  if (!box) return false;
  box.focus();
  box.select();
  return true;
}
document.addEventListener("keydown", function (event) {
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
  var target = event.target;
  if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
  event.preventDefault();
  if (!focusSearch()) window.location.href = "/ui/memories#q";
});
document.addEventListener("DOMContentLoaded", function () {
  if (window.location.hash === "#q") focusSearch();
});
