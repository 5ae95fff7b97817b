// The page works without this file: it only submits the filter form when a select or the date changes.
document.addEventListener("change", function (e) {
  if (e.target.classList && e.target.classList.contains("autosubmit")) { e.target.form.submit(); }
});
