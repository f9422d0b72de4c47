// StateFlow UI: flow-graph highlighting, step playback, plot hover, live refresh.
// No framework and no network beyond this server (pages also work without this script).
"use strict";

function titleOf(g) {
  const t = g.querySelector("title");
  return t ? t.textContent.trim() : "";
}

function edgeRule(e) {
  // graphviz writes the rule as "N. label" (stateflow.graph.to_dot)
  const t = e.querySelector("text");
  return t ? t.textContent.trim().replace(/^\d+\.\s*/, "") : "";
}

function highlightPath(box, path, current, edges) {
  const visited = new Set(path);
  const pairs = new Set();
  const rules = new Map(); // "S->T" -> the rules taken between them (when the record has its transitions)
  for (let i = 0; i + 1 < path.length; i++) pairs.add(path[i] + "->" + path[i + 1]);
  (edges || []).forEach(([s, t, rule]) => {
    const k = s + "->" + t;
    if (!rules.has(k)) rules.set(k, new Set());
    rules.get(k).add(rule);
  });
  box.querySelectorAll("svg g.node").forEach((n) => {
    const name = titleOf(n);
    n.classList.toggle("visited", visited.has(name));
    n.classList.toggle("current", current !== null && name === current);
  });
  box.querySelectorAll("svg g.edge").forEach((e) => {
    const k = titleOf(e);
    const taken = rules.has(k) ? rules.get(k).has(edgeRule(e)) : pairs.has(k);
    e.classList.toggle("visited", pairs.has(k) && taken);
  });
}

function setupEpisode() {
  const box = document.getElementById("graph");
  const steps = Array.from(document.querySelectorAll("#playback .step"));
  if (!box) return;
  const path = JSON.parse(box.dataset.path || "[]");
  const edges = JSON.parse(box.dataset.edges || "[]");
  highlightPath(box, path, null, edges);
  if (!steps.length) return;
  let pos = -1; // -1: every step shown
  let timer = null;
  const label = document.getElementById("pb-pos");
  function show(i) {
    pos = i;
    steps.forEach((s, k) => {
      s.classList.toggle("hidden", pos >= 0 && k > pos);
      s.classList.toggle("current", k === pos);
    });
    if (pos < 0) {
      label.textContent = "all steps";
      highlightPath(box, path, null, edges);
    } else {
      const st = steps[pos];
      label.textContent = "step " + (pos + 1) + " of " + steps.length + " · " + st.dataset.state;
      // the path walked so far: the states of the steps shown
      const walked = [];
      steps.slice(0, pos + 1).forEach((s) => { if (walked[walked.length - 1] !== s.dataset.state) walked.push(s.dataset.state); });
      highlightPath(box, walked, st.dataset.state, edges);
      st.scrollIntoView({ block: "nearest" });
    }
  }
  function stop() { if (timer) { clearInterval(timer); timer = null; document.getElementById("pb-play").textContent = "play"; } }
  document.getElementById("pb-first").addEventListener("click", () => { stop(); show(0); });
  document.getElementById("pb-prev").addEventListener("click", () => { stop(); show(Math.max(0, pos < 0 ? steps.length - 1 : pos - 1)); });
  document.getElementById("pb-next").addEventListener("click", () => { stop(); show(pos < 0 ? 0 : Math.min(steps.length - 1, pos + 1)); });
  document.getElementById("pb-all").addEventListener("click", () => { stop(); show(-1); });
  document.getElementById("pb-play").addEventListener("click", (ev) => {
    if (timer) { stop(); return; }
    ev.target.textContent = "pause";
    if (pos < 0 || pos >= steps.length - 1) show(0);
    timer = setInterval(() => { if (pos >= steps.length - 1) stop(); else show(pos + 1); }, 900);
  });
}

function setupPlot() {
  // hovering a point, its legend entry or its table row marks all three
  const all = document.querySelectorAll("[data-cell]");
  all.forEach((el) => {
    el.addEventListener("mouseenter", () => {
      document.querySelectorAll('[data-cell="' + CSS.escape(el.dataset.cell) + '"]').forEach((x) => x.classList.add("hl"));
    });
    el.addEventListener("mouseleave", () => { all.forEach((x) => x.classList.remove("hl")); });
  });
}

function setupLive() {
  // a run in progress: poll the server's stamp and reload the page body when the files grew
  if (document.body.dataset.live !== "yes") return;
  const badge = document.getElementById("live");
  const every = parseInt(document.body.dataset.pollMs || "2000", 10);
  if (document.getElementById("playback")) { if (badge) badge.classList.add("paused"); return; } // an episode does not change
  setInterval(async () => {
    try {
      const r = await fetch("/api/stamp", { cache: "no-store" });
      const { stamp } = await r.json();
      if (stamp === document.body.dataset.stamp) return;
      const page = await fetch(location.href, { cache: "no-store" });
      const doc = new DOMParser().parseFromString(await page.text(), "text/html");
      document.getElementById("page").replaceWith(doc.getElementById("page"));
      document.querySelector("header .sources").replaceWith(doc.querySelector("header .sources"));
      document.body.dataset.stamp = doc.body.dataset.stamp;
      setupPlot();
    } catch (err) {
      if (badge) badge.classList.add("paused");
    }
  }, every);
}

function setupReport() {
  // the one-file report: a click on an episode shows its detail and its path on its group's graph
  document.querySelectorAll("section.group").forEach((group) => {
    const box = group.querySelector(".graph");
    const items = Array.from(group.querySelectorAll(".ep"));
    const details = Array.from(group.querySelectorAll(".epdetail"));
    function show(i) {
      items.forEach((e, k) => e.classList.toggle("sel", k === i));
      details.forEach((d, k) => d.classList.toggle("hidden", k !== i));
      const d = details[i];
      if (box && d) highlightPath(box, JSON.parse(d.dataset.path || "[]"), null, JSON.parse(d.dataset.edges || "[]"));
    }
    items.forEach((e, i) => e.addEventListener("click", () => show(i)));
    if (items.length) show(0);
  });
}

setupEpisode();
setupReport();
setupPlot();
setupLive();
document.body.dataset.ready = "yes";
