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
  const simple = box.dataset.simple === "yes"; // one arrow per pair of states: the pair decides
  box.querySelectorAll("svg g.edge").forEach((e) => {
    const k = titleOf(e);
    const taken = simple || !rules.has(k) ? pairs.has(k) : rules.get(k).has(edgeRule(e));
    e.classList.toggle("visited", pairs.has(k) && taken);
  });
}

function setupGraphViews() {
  // the episode page's graph: every rule or simplified, fitted to the column or at actual size
  const full = document.getElementById("graph");
  const simple = document.getElementById("graph-simple");
  if (!full || !simple) return;
  const buttons = (ids, on) => ids.forEach((id) => document.getElementById(id).classList.toggle("on", id === on));
  document.getElementById("g-every").addEventListener("click", () => {
    full.classList.remove("hidden"); simple.classList.add("hidden"); buttons(["g-every", "g-simple"], "g-every");
  });
  document.getElementById("g-simple").addEventListener("click", () => {
    simple.classList.remove("hidden"); full.classList.add("hidden"); buttons(["g-every", "g-simple"], "g-simple");
  });
  document.getElementById("g-fit").addEventListener("click", () => {
    [full, simple].forEach((b) => b.classList.remove("actual")); buttons(["g-fit", "g-actual"], "g-fit");
  });
  document.getElementById("g-actual").addEventListener("click", () => {
    [full, simple].forEach((b) => b.classList.add("actual")); buttons(["g-fit", "g-actual"], "g-actual");
  });
}

function setupEpisode() {
  const box = document.getElementById("graph");
  const steps = Array.from(document.querySelectorAll("#playback .step"));
  if (!box) return;
  const path = JSON.parse(box.dataset.path || "[]");
  const edges = JSON.parse(box.dataset.edges || "[]");
  const boxes = [box, document.getElementById("graph-simple")].filter(Boolean);
  const mark = (p, current) => boxes.forEach((b) => highlightPath(b, p, current, edges));
  mark(path, null);
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
      mark(path, null);
    } else {
      const st = steps[pos];
      label.textContent = "step " + (pos + 1) + " of " + steps.length + " · " + st.dataset.state;
      // the path walked so far: the states of the steps shown
      const walked = [];
      steps.slice(0, pos + 1).forEach((s) => { if (walked[walked.length - 1] !== s.dataset.state) walked.push(s.dataset.state); });
      mark(walked, st.dataset.state);
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

function badgeState(badge, state, text, title) {
  // the header's badge says in words (and its tooltip in full) why its colour is what it is
  if (!badge) return;
  badge.classList.toggle("paused", state !== "live");
  badge.classList.toggle("offline", state === "offline");
  badge.dataset.state = state;
  badge.textContent = text;
  badge.title = title;
}

function setupLive() {
  // a run in progress: poll the server's stamp and reload the page body when the files grew
  if (document.body.dataset.live !== "yes") return;
  const badge = document.getElementById("live");
  const every = parseInt(document.body.dataset.pollMs || "2000", 10);
  if (document.getElementById("playback")) { // an episode does not change
    badgeState(badge, "static", "not refreshed", "grey: an episode's record does not change once saved, so this page is not refreshed (the overview and tasks pages are)");
    return;
  }
  if (badge) badge.dataset.liveTitle = badge.title;
  if (document.getElementById("live-episodes")) {
    badgeState(badge, "live", "live", "live: this page shows the episodes in flight as their events arrive");
    return; // the live page is fed by its own stream
  }
  setInterval(async () => {
    try {
      const r = await fetch("/api/stamp", { cache: "no-store" });
      const { stamp } = await r.json();
      if (badge && badge.dataset.state !== "live") badgeState(badge, "live", "live", badge.dataset.liveTitle || "");
      if (stamp === document.body.dataset.stamp) return;
      const page = await fetch(location.href, { cache: "no-store" });
      const doc = new DOMParser().parseFromString(await page.text(), "text/html");
      document.getElementById("page").replaceWith(doc.getElementById("page"));
      document.querySelector("header .sources").replaceWith(doc.querySelector("header .sources"));
      document.body.dataset.stamp = doc.body.dataset.stamp;
      setupPlot();
    } catch (err) {
      badgeState(badge, "offline", "offline", "orange: the last check for new records failed (the server stopped, or answered with an error); the page goes live again when a check succeeds");
    }
  }, every);
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text; // model output: text only, never markup
  return e;
}

function setupLiveEpisodes() {
  // the episodes in flight: server-sent events from the runs' side files (tasks/ui/live.py)
  const box = document.getElementById("live-episodes");
  if (!box || !window.EventSource) return;
  const none = document.getElementById("live-none");
  const panels = new Map();
  function panel(key) {
    let p = panels.get(key);
    if (p) return p;
    const root = el("section", "live-ep");
    root.dataset.file = key;
    const head = el("h2", "lhead", "episode " + key);
    const now = el("p", "lstate");
    const path = el("p", "path");
    const tokens = el("pre", "tokens");
    const steps = el("div", "lsteps");
    root.append(head, now, path, tokens, steps);
    box.append(root);
    p = { root, head, now, path, tokens, steps, walked: [] };
    panels.set(key, p);
    if (none) none.classList.add("hidden");
    return p;
  }
  function enter(p, state) {
    p.walked.push(state);
    p.now.replaceChildren(el("span", "", "now in "), el("span", "now", state));
    p.root.dataset.state = state;
    p.path.textContent = p.walked.join(" › ");
    p.tokens.textContent = "";
  }
  const feed = new EventSource(box.dataset.feed);
  feed.onmessage = (msg) => {
    const ev = JSON.parse(msg.data);
    const p = panel(ev.src + "/" + ev.file);
    if (ev.gone) {
      p.root.classList.add("done");
      p.root.dataset.done = "yes";
      p.now.replaceChildren(el("span", "", "recorded: see the "), Object.assign(el("a", "", "tasks page"), { href: "/tasks" }));
      return;
    }
    if (ev.stale) {
      p.root.classList.add("done");
      p.root.dataset.stale = "yes";
      p.now.textContent = "stopped: the run that wrote this is gone (killed?); the episode was not recorded";
      return;
    }
    const line = ev.line;
    if (line.type === "episode") {
      p.head.textContent = line.method + " · task " + line.task + " · " + line.models;
      p.head.title = line.query;
    } else if (line.type === "state") {
      enter(p, line.state);
    } else if (line.type === "token") {
      p.tokens.textContent += line.text;
      p.root.dataset.tokens = String((parseInt(p.root.dataset.tokens || "0", 10)) + 1);
    } else if (line.type === "step") {
      const s = el("div", "m " + (line.kind || ""));
      s.append(el("div", "mhead", line.state + " · " + line.output), el("pre", "", line.text));
      p.steps.append(s);
      if (line.streamed) p.tokens.textContent = "";
    } else if (line.type === "end") {
      p.now.textContent = "finished (" + line.status + "), saving its record";
    } else if (line.type === "truncated") {
      p.steps.append(el("p", "note", "the live file reached its size bound; the record will hold the rest"));
    }
  };
}

function setupReplays() {
  // the form says exactly what the chosen state, model and scope change (sentences from the server)
  const form = document.getElementById("whatif-form");
  if (form) {
    const changes = JSON.parse(form.dataset.changes || "{}");
    const what = document.getElementById("whatif-what");
    const pick = (id) => document.getElementById(id).value;
    const update = () => { what.textContent = changes[pick("whatif-at") + "|" + pick("whatif-profile") + "|" + pick("whatif-scope")] || ""; };
    ["whatif-at", "whatif-profile", "whatif-scope"].forEach((id) => document.getElementById(id).addEventListener("change", update));
    update();
  }
  // a replay running on the server: show where it is, reload the page (with its result) when it ends
  document.querySelectorAll('.replay[data-status="running"]').forEach((box) => {
    const line = box.querySelector(".replay-progress");
    const timer = setInterval(async () => {
      try {
        const r = await fetch("/api/whatif?job=" + encodeURIComponent(box.dataset.job), { cache: "no-store" });
        const job = await r.json();
        if (job.status !== "running") { clearInterval(timer); location.reload(); return; }
        const p = job.progress || {};
        if (line && p.state) {
          line.replaceChildren(
            el("span", "", "running " + p.seconds + " s: now in "), el("strong", "replay-state", p.state),
            el("span", "", " · " + p.steps + " step" + (p.steps === 1 ? "" : "s") + " so far" + (p.last ? " · last: " + p.last : "") + " · also on the "),
            Object.assign(el("a", "", "live page"), { href: "/live" }));
          box.dataset.steps = String(p.steps);
        }
      } catch (err) { clearInterval(timer); }
    }, 500);
  });
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

setupGraphViews();
setupEpisode();
setupReport();
setupPlot();
setupLive();
setupLiveEpisodes();
setupReplays();
document.body.dataset.ready = "yes";
