"""The search page: plain HTML, a little script, no external resource."""

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fastreid search</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<style>
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
form { display: flex; gap: 1rem; align-items: center; margin-bottom: 1rem; }
#error { color: #b00020; font-weight: 600; min-height: 1.5em; }
#results { display: flex; flex-wrap: wrap; gap: .75rem; }
figure { margin: 0; text-align: center; font-size: .8rem; }
figure img { height: 160px; display: block; border: 3px solid #ddd; }
#query img { height: 160px; border: 3px solid #333; }
</style></head>
<body>
<h1>fastreid search</h1>
<p>Gallery: <span id="size">__SIZE__</span> images. Upload a person crop to see its nearest gallery images.</p>
<form id="form">
  <input type="file" id="image" name="image" accept="image/*" required>
  <label>k <input type="number" id="k" name="k" value="10" min="1" max="__MAX_K__"></label>
  <button type="submit">Search</button>
</form>
<div id="error" role="alert"></div>
<div id="query"></div>
<div id="results"></div>
<script>
const form = document.getElementById("form");
form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const error = document.getElementById("error"), results = document.getElementById("results");
  error.textContent = ""; results.innerHTML = "";
  const file = document.getElementById("image").files[0];
  if (!file) { error.textContent = "Choose an image first"; return; }
  document.getElementById("query").innerHTML = "";
  const body = new FormData();
  body.append("image", file);
  body.append("k", document.getElementById("k").value);
  const response = await fetch("search", {method: "POST", body});
  const answer = await response.json();
  if (!response.ok) { error.textContent = answer.detail || ("Error " + response.status); return; }
  const query = document.createElement("img");
  query.src = URL.createObjectURL(file); query.alt = "query";
  document.getElementById("query").append(query);
  for (const hit of answer.results) {
    const figure = document.createElement("figure");
    const img = document.createElement("img");
    img.src = "gallery/" + hit.index; img.alt = hit.name;
    const caption = document.createElement("figcaption");
    caption.className = "hit";
    caption.textContent = "#" + hit.rank + " " + hit.name + " (" + hit.distance.toFixed(3) + ")";
    figure.append(img, caption); results.append(figure);
  }
});
</script>
</body></html>
"""
