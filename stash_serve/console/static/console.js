// The console works without this file; it only adds conveniences.
// A form with data-confirm asks before it is sent (an erasure, a merge).
document.addEventListener("submit", (event) => {
  const form = event.target;
  const question = form.getAttribute && form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) event.preventDefault();
});
