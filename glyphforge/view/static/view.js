// glyphforge view: the page. Plain JS, no build step, nothing fetched but this server's API.
"use strict";
const $ = (id) => document.getElementById(id);
const state = { key: null, page: 0, rows: [], frames: 0, frame: 0, detail: null, timer: null };
const SVG = "http://www.w3.org/2000/svg";

function api(path) {
  return fetch(path).then((response) => response.json().then((body) => {
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }));
}
function say(text) { $("message").textContent = text || ""; }
function base() { return `/api/datasets/${encodeURIComponent(state.key)}`; }
function show(section) {
  for (const id of ["browse", "detail", "stats"]) $(id).hidden = id !== section;
}

// One example's picture with its overlays: image, instance masks and an SVG of boxes, labels and ids.
function picture(row, frame) {
  const holder = document.createElement("div");
  holder.className = "frame";
  const img = document.createElement("img");
  img.className = "image";
  img.alt = row.caption;
  holder.appendChild(img);
  if (row.masks) {
    const mask = document.createElement("img");
    mask.className = "mask";
    mask.alt = "";
    holder.appendChild(mask);
  }
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${row.shape[1]} ${row.shape[0]}`);
  svg.setAttribute("preserveAspectRatio", "none");
  holder.appendChild(svg);
  drawFrame(holder, row, frame);
  return holder;
}

function drawFrame(holder, row, frame) {
  const f = row.frames ? frame % row.frames : 0;
  const query = row.frames ? `?frame=${f}` : "";
  holder.querySelector(".image").src = `${base()}/image/${row.index}.png${query}`;
  const mask = holder.querySelector(".mask");
  if (mask) mask.src = `${base()}/mask/${row.index}.png${query}`;
  const svg = holder.querySelector("svg");
  svg.replaceChildren();
  for (const object of (row.objects[f] || [])) {
    const [top, left, bottom, right] = object.box;
    const rect = document.createElementNS(SVG, "rect");
    rect.setAttribute("class", "ov-box");
    rect.setAttribute("x", left); rect.setAttribute("y", top);
    rect.setAttribute("width", right - left); rect.setAttribute("height", bottom - top);
    svg.appendChild(rect);
    // the class above the box (below it at the top edge), the id below it (above it at the bottom edge)
    const above = top >= 5 ? top - 1 : bottom + 5;
    const below = bottom + 5 <= row.shape[0] ? bottom + 5 : top - 1;
    for (const [cls, text, y] of [["ov-label", object.label, above], ["ov-id", `#${object.id}`, below]]) {
      const label = document.createElementNS(SVG, "text");
      label.setAttribute("class", cls);
      label.setAttribute("x", left); label.setAttribute("y", y);
      label.textContent = text;
      svg.appendChild(label);
    }
  }
}

function loadDatasets() {
  return api("/api/datasets").then((body) => {
    $("data-dir").textContent = body.data_dir;
    const list = $("datasets");
    list.replaceChildren();
    for (const dataset of body.datasets) {
      const item = document.createElement("li");
      const link = document.createElement("a");
      link.href = `#${dataset.key}`;
      link.dataset.key = dataset.key;
      link.textContent = dataset.title;
      item.appendChild(link);
      list.appendChild(item);
    }
    if (!body.datasets.length) say("This data dir holds no prepared or built dataset yet.");
  });
}

function openDataset(key) {
  state.key = key;
  state.page = 0;
  for (const link of document.querySelectorAll("#datasets a")) link.classList.toggle("current", link.dataset.key === key);
  return api(`${base()}/stats`).then((stats) => {
    state.stats = stats;
    state.frames = stats.info.frames;
    $("title").textContent = stats.title;
    document.body.classList.toggle("stills", !stats.info.frames);
    document.body.classList.toggle("classes", !stats.info.scenes);
    const select = $("class-filter");
    select.replaceChildren(new Option("any", ""));
    for (const name of stats.per_class.names) select.appendChild(new Option(name, name));
    $("objects-filter").value = "";
    show("browse");
    return loadPage();
  }).catch((error) => say(error.message));
}

function loadPage() {
  const query = new URLSearchParams({ page: state.page, size: $("page-size").value });
  if ($("class-filter").value) query.set("class", $("class-filter").value);
  if ($("objects-filter").value !== "") query.set("objects", $("objects-filter").value);
  return api(`${base()}/rows?${query}`).then((body) => {
    say("");
    state.rows = body.rows;
    $("page-info").textContent = `page ${body.page + 1} of ${body.pages} (${body.total} examples)`;
    $("prev").disabled = body.page === 0;
    $("next").disabled = body.page + 1 >= body.pages;
    const grid = $("grid");
    grid.replaceChildren();
    for (const row of body.rows) {
      const card = document.createElement("div");
      card.className = "card";
      card.dataset.index = row.index;
      card.appendChild(picture(row, state.frame));
      const text = document.createElement("div");
      text.className = "caption";
      text.textContent = row.caption;
      card.appendChild(text);
      card.addEventListener("click", () => openExample(row.index));
      grid.appendChild(card);
    }
    grid.dataset.loaded = `${state.key}:${body.page}:${query}`;
  }).catch((error) => say(error.message));
}

function openExample(index) {
  return api(`${base()}/example/${index}`).then((example) => {
    state.detail = example;
    example.shape = (state.rows.find((row) => row.index === index) || {}).shape;
    $("detail-title").textContent = `example ${index}: ${example.caption}`;
    $("frame").max = Math.max(example.frames - 1, 0);
    $("frame").value = 0;
    drawDetail();
    const table = $("targets");
    table.replaceChildren();
    for (const [name, value] of Object.entries(example.table)) {
      const line = table.insertRow();
      line.insertCell().textContent = name;
      line.insertCell().textContent = JSON.stringify(value);
    }
    show("detail");
  }).catch((error) => say(error.message));
}

function drawDetail() {
  const example = state.detail;
  const view = $("detail-view");
  const row = { ...example, shape: example.shape || [64, 64] };
  view.replaceChildren(picture(row, Number($("frame").value)));
  view.style.width = `${row.shape[1] * Number($("zoom").value)}px`;
  $("frame-number").textContent = example.frames ? `${Number($("frame").value) + 1} / ${example.frames}` : "";
  // the objects the shown frame holds, one a line
  const table = $("objects-table");
  table.replaceChildren();
  const objects = example.objects[example.frames ? Number($("frame").value) : 0] || [];
  if (!objects.length) return;
  const head = table.createTHead().insertRow();
  for (const name of ["slot", "id", "class", "top", "left", "bottom", "right"]) {
    head.appendChild(document.createElement("th")).textContent = name;
  }
  const body = table.createTBody();
  for (const object of objects) {
    const line = body.insertRow();
    for (const value of [object.slot, object.id, object.label, ...object.box]) line.insertCell().textContent = value;
  }
}

function showStats() {
  const stats = state.stats;
  const charts = $("charts");
  charts.replaceChildren();
  for (const chart of [stats.per_class, stats.per_scene, stats.scene_labels]) {
    if (!chart) continue;
    const block = document.createElement("div");
    block.className = "chart";
    const heading = document.createElement("h3");
    heading.textContent = chart.what;
    block.appendChild(heading);
    const most = Math.max(1, ...chart.counts);
    chart.names.forEach((name, i) => {
      const line = document.createElement("div");
      line.className = "bar-row";
      line.innerHTML = '<span class="name"></span><span class="bar"></span><span class="count"></span>';
      line.querySelector(".name").textContent = name;
      line.querySelector(".bar").style.width = `${(300 * (chart.counts[i] || 0)) / most}px`;
      line.querySelector(".count").textContent = chart.counts[i] || 0;
      block.appendChild(line);
    });
    charts.appendChild(block);
  }
  const info = $("info");
  info.replaceChildren();
  for (const [name, value] of Object.entries(stats.info)) {
    const line = info.insertRow();
    line.insertCell().textContent = name;
    line.insertCell().textContent = typeof value === "object" ? JSON.stringify(value, null, 1) : value;
  }
  show("stats");
}

function tick() {
  if (!state.frames || !$("play").checked) return;
  state.frame = (state.frame + 1) % state.frames;
  for (const card of document.querySelectorAll("#grid .card")) {
    const row = state.rows.find((r) => r.index === Number(card.dataset.index));
    if (row) drawFrame(card.querySelector(".frame"), row, state.frame);
  }
}

function overlays() {
  for (const name of ["boxes", "labels", "masks", "ids"]) {
    document.body.classList.toggle(`no-${name}`, !$(`show-${name}`).checked);
  }
}

function route() {
  const key = decodeURIComponent(location.hash.slice(1));
  if (key) openDataset(key);
}

window.addEventListener("DOMContentLoaded", () => {
  for (const name of ["boxes", "labels", "masks", "ids"]) $(`show-${name}`).addEventListener("change", overlays);
  overlays();
  $("class-filter").addEventListener("change", () => { state.page = 0; loadPage(); });
  $("objects-filter").addEventListener("change", () => { state.page = 0; loadPage(); });
  $("page-size").addEventListener("change", () => { state.page = 0; loadPage(); });
  $("prev").addEventListener("click", () => { state.page -= 1; loadPage(); });
  $("next").addEventListener("click", () => { state.page += 1; loadPage(); });
  $("show-stats").addEventListener("click", showStats);
  $("close-detail").addEventListener("click", () => show("browse"));
  $("close-stats").addEventListener("click", () => show("browse"));
  $("zoom").addEventListener("change", drawDetail);
  $("frame").addEventListener("input", drawDetail);
  window.addEventListener("hashchange", route);
  state.timer = setInterval(tick, 200);
  loadDatasets().then(route).catch((error) => say(error.message));
});
