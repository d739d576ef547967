// Open every evidence table before printing, so a printed report shows them (the page works without this).
window.addEventListener("beforeprint", function () {
  document.querySelectorAll("details").forEach(function (d) { d.open = true; });
});
