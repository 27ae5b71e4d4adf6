"""The search page: plain HTML, a little script, no external resource (the server's
Content-Security-Policy forbids any)."""

from __future__ import annotations

import string

__all__ = ["render_page"]

_PAGE = string.Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fastreid search</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<style>
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
form { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; margin-bottom: 1rem; }
input[type=number] { width: 4em; }
#error { color: #b00020; font-weight: 600; min-height: 1.5em; }
#status { color: #555; min-height: 1.2em; }
#query { margin-bottom: 1rem; }
#query figure { display: inline-block; }
#query img { border-color: #333; }
#results { display: grid; grid-template-columns: repeat(auto-fill, minmax(180px, 1fr)); gap: .75rem; }
figure { margin: 0; text-align: center; font-size: .8rem; overflow-wrap: anywhere; }
figure img { height: 160px; max-width: 100%; object-fit: contain; display: block; margin: 0 auto;
             border: 3px solid #ddd; background: #f4f4f4; }
.distance { font-variant-numeric: tabular-nums; color: #555; }
</style></head>
<body>
<h1>fastreid search</h1>
<p>Gallery: <span id="size">$size</span> images. Upload a person crop (up to $max_mb MB) to see its
nearest gallery images; the distance is the cosine distance (0: the same feature).</p>
<form id="form">
  <input type="file" id="image" name="image" accept="image/*" required>
  <label>k <input type="number" id="k" name="k" value="$default_k" min="1" max="$max_k"></label>
  <button type="submit" id="submit">Search</button>
</form>
<div id="error" role="alert"></div>
<div id="status"></div>
<div id="query"></div>
<div id="results"></div>
<script>
"use strict";
const el = (id) => document.getElementById(id);
const maxBytes = $max_bytes;

function clear() {
  el("error").textContent = ""; el("status").textContent = "";
  el("query").replaceChildren(); el("results").replaceChildren();
}

async function errorOf(response) {
  const text = await response.text();
  try {
    const detail = JSON.parse(text).detail;
    if (detail) return typeof detail === "string" ? detail : JSON.stringify(detail);
  } catch (e) { /* not JSON: show the status */ }
  return "The server answered " + response.status + " " + response.statusText;
}

function figureOf(hit) {
  const figure = document.createElement("figure");
  const img = document.createElement("img");
  img.src = "gallery/" + encodeURIComponent(hit.index) + "?name=" + encodeURIComponent(hit.name); img.alt = hit.name; img.loading = "lazy";
  const caption = document.createElement("figcaption");
  caption.className = "hit";
  caption.textContent = "#" + hit.rank + " " + hit.name;
  const distance = document.createElement("div");
  distance.className = "distance";
  let text = hit.distance.toFixed(3);
  if (hit.pid !== undefined) text += " · id " + hit.pid + " · cam " + hit.camid;
  distance.textContent = text;
  figure.append(img, caption, distance);
  return figure;
}

el("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  clear();
  const file = el("image").files[0];
  if (!file) { el("error").textContent = "Choose an image first"; return; }
  if (file.size > maxBytes) {
    el("error").textContent = "The image is larger than the limit of " + (maxBytes / 1048576) + " MB";
    return;
  }
  const body = new FormData();
  body.append("k", el("k").value);
  body.append("image", file);
  el("submit").disabled = true; el("status").textContent = "Searching…";
  try {
    const response = await fetch("search", {method: "POST", body});
    if (!response.ok) { el("status").textContent = ""; el("error").textContent = await errorOf(response); return; }
    const answer = await response.json();
    const query = document.createElement("figure"), preview = document.createElement("img");
    const caption = document.createElement("figcaption");
    preview.src = URL.createObjectURL(file); preview.alt = "query";
    preview.onload = () => URL.revokeObjectURL(preview.src);
    caption.textContent = "query: " + file.name;
    query.append(preview, caption);
    el("query").append(query);
    el("results").append(...answer.results.map(figureOf));
    el("status").textContent = answer.results.length + " results in " + answer.took_ms + " ms";
  } catch (e) {
    el("status").textContent = "";
    el("error").textContent = "The server cannot be reached: " + e.message;
  } finally {
    el("submit").disabled = false;
  }
});
</script>
</body></html>
""")


def render_page(size: int, max_k: int, default_k: int, max_bytes: int) -> str:
    """The page for a gallery of ``size`` images (every value written into it is a number)."""
    return _PAGE.substitute(
        size=int(size),
        max_k=int(max_k),
        default_k=int(default_k),
        max_bytes=int(max_bytes),
        max_mb=f"{max_bytes / 1024 / 1024:g}",
    )
