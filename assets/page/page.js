// Parasol's live page: every few seconds, read /v1/stats, show each backend's figures over the
// recent window (each number also in data-value, exactly as computed, for tests), and append
// them to charts of the last minutes (uPlot). No build step; nothing fetched from elsewhere.
"use strict";

const params = new URLSearchParams(location.search);
const INTERVAL_MS = Math.max(250, Number(params.get("interval_ms")) || 2000);
const HISTORY_S = 10 * 60;
// Okabe–Ito: distinguishable with the common colour-vision deficiencies.
const COLOURS = { filter: "#0072b2", caching: "#e69f00", asc: "#009e73", apsr: "#cc79a7" };
const SPARE = ["#d55e00", "#56b4e9", "#000000", "#f0e442"];
const CHARTS = [
  ["chart-rate", "decisions_per_s"],
  ["chart-decline", "decline_ratio"],
  ["chart-queries", "queries_per_request"],
  ["chart-latency", "latency_p99_ms"],
];

const history = { t: [], byBackend: {} };
const charts = {};
let chartBackends = "";
let redraws = 0;

function colour(name, i) {
  return COLOURS[name] || SPARE[i % SPARE.length];
}

// The figures of one backend, from its /v1/stats object.
function figures(b) {
  const w = b.window || {};
  const lat = w.latency_ms || {};
  const f = {
    decisions_per_s: w.seconds > 0 ? w.requests / w.seconds : 0,
    decline_ratio: w.decline_ratio,
    queries_per_request: w.queries_per_request,
    latency_p50_ms: lat.p50,
    latency_p90_ms: lat.p90,
    latency_p99_ms: lat.p99,
    requests: b.requests,
    placed: b.placed,
  };
  // Avoidable declines and declines by cause: the window's when it has them, else the run's.
  const avoidable = w.avoidable_decline_ratio !== undefined ? w : b;
  if (avoidable.avoidable_decline_ratio !== undefined) {
    f.avoidable_decline_ratio = avoidable.avoidable_decline_ratio;
  }
  const avoidableScope = avoidable === w ? "" : " (run)";
  const causes = w.declines_by_cause || b.declines_by_cause;
  const attempts = w.declines_by_cause ? w.attempts : b.attempts;
  const causeScope = w.declines_by_cause ? "" : " (run)";
  return { f, causes: causes || null, causeScope, attempts, avoidableScope };
}

function text(value, kind) {
  if (value === null || value === undefined) return "—";
  if (kind === "ratio") return (100 * value).toFixed(2) + " %";
  if (kind === "ms") return value.toFixed(2) + " ms";
  if (kind === "count" || kind === "state") return String(value);
  return value.toFixed(2);
}

function cell(backend, metric, value, kind) {
  const td = document.createElement("td");
  td.className = "num";
  td.dataset.backend = backend;
  td.dataset.metric = metric;
  td.dataset.value = value === undefined ? "null" : JSON.stringify(value);
  td.textContent = text(value, kind);
  return td;
}

function row(table, label, td, cls) {
  const tr = document.createElement("tr");
  if (cls) tr.className = cls;
  const name = document.createElement("td");
  name.textContent = label;
  tr.append(name, td);
  table.append(tr);
}

function card(name, i, b, active) {
  const { f, causes, causeScope, attempts, avoidableScope } = figures(b);
  const div = document.createElement("div");
  div.className = "backend" + (name === active ? " active" : "");
  div.dataset.backend = name;
  const h = document.createElement("h2");
  const swatch = document.createElement("span");
  swatch.className = "swatch";
  swatch.style.background = colour(name, i);
  h.append(swatch, name + (name === active ? " (active)" : ""));
  const table = document.createElement("table");
  row(table, "decisions / s", cell(name, "decisions_per_s", f.decisions_per_s, "rate"));
  row(table, "decline ratio", cell(name, "decline_ratio", f.decline_ratio, "ratio"));
  if ("avoidable_decline_ratio" in f) {
    row(table, "avoidable decline ratio" + avoidableScope,
      cell(name, "avoidable_decline_ratio", f.avoidable_decline_ratio, "ratio"));
  }
  if (causes) {
    for (const cause of Object.keys(causes).sort()) {
      const td = cell(name, "declines_by_cause." + cause, causes[cause], "count");
      if (attempts > 0) td.textContent += " (" + text(causes[cause] / attempts, "ratio") + ")";
      row(table, cause.replace(/_/g, " ") + causeScope, td, "cause");
    }
  }
  row(table, "queries / request", cell(name, "queries_per_request", f.queries_per_request, "rate"));
  row(table, "latency p50", cell(name, "latency_p50_ms", f.latency_p50_ms, "ms"));
  row(table, "latency p90", cell(name, "latency_p90_ms", f.latency_p90_ms, "ms"));
  row(table, "latency p99", cell(name, "latency_p99_ms", f.latency_p99_ms, "ms"));
  row(table, "requests (run)", cell(name, "requests", f.requests, "count"));
  row(table, "placed (run)", cell(name, "placed", f.placed, "count"));
  // Batch placement ([batch], ECSched): rounds solved, instances in them, left unscheduled,
  // calls sent back to one at a time (all causes), the rounds' sizes and solve times.
  if (b.batch) {
    const fallbacks = Object.values(b.batch.fallbacks || {}).reduce((a, n) => a + n, 0);
    const size = b.batch.size || {};
    const solve = b.batch.solve_latency_ms || {};
    row(table, "batch rounds (run)", cell(name, "batch.rounds", b.batch.rounds, "count"));
    row(table, "batch instances (run)", cell(name, "batch.instances", b.batch.instances, "count"));
    row(table, "batch unscheduled (run)",
      cell(name, "batch.unscheduled", b.batch.unscheduled, "count"));
    row(table, "batch fallbacks (run)", cell(name, "batch.fallbacks", fallbacks, "count"));
    row(table, "batch size p50 (run)", cell(name, "batch.size.p50", size.p50, "count"));
    row(table, "batch size max (run)", cell(name, "batch.size.max", size.max, "count"));
    row(table, "batch solve p50 (run)",
      cell(name, "batch.solve_latency_ms.p50", solve.p50, "ms"));
    row(table, "batch solve p99 (run)",
      cell(name, "batch.solve_latency_ms.p99", solve.p99, "ms"));
  }
  div.append(h, table);
  return div;
}

// What the whole service shows beside the backends: Flex's penalty and QoS, the hosts' measured
// usage, the operator's plugin chains, each plugin's calls, denials, failures and breaker, the
// requests decided on Placement's provider trees by outcome, and the rebalancing planner.
function serviceCard(stats) {
  const div = document.createElement("div");
  div.className = "backend";
  div.dataset.backend = "service";
  const h = document.createElement("h2");
  h.textContent = "admission and plugins";
  const table = document.createElement("table");
  const flex = stats.flex || {};
  if (stats.flex) {
    row(table, "Flex " + (flex.enabled ? "on" : "off") + ": penalty P",
      cell("service", "flex.penalty", flex.penalty, "rate"));
    row(table, "Flex QoS Q(t) (source: " + flex.qos_source + ")",
      cell("service", "flex.qos", flex.qos, "ratio"));
    // [flex] manage_allocation_ratio: each managed class's ratio 1/(P·u) and the writes.
    const managed = flex.allocation_ratio || {};
    row(table, "Flex manages allocation ratios",
      cell("service", "flex.allocation_ratio.enabled", managed.enabled ? "yes" : "no", "state"));
    if (managed.enabled) {
      for (const [cls, c] of Object.entries(managed.classes || {}).sort()) {
        row(table, "Flex ratio " + cls + " [" + c.min + ", " + c.max + "]",
          cell("service", "flex.allocation_ratio.classes." + cls + ".target", c.target, "rate"));
      }
      for (const k of ["writes", "conflicts", "failures", "overridden"]) {
        row(table, "Flex ratio " + k, cell("service", "flex.allocation_ratio." + k, managed[k], "count"));
      }
    }
  }
  const hosts = (stats.usage || {}).hosts;
  if (hosts) {
    for (const state of ["fresh", "expired", "none"]) {
      row(table, "hosts with " + state + " usage",
        cell("service", "usage.hosts." + state, hosts[state], "count"));
    }
  }
  const chains = stats.plugin_chains || {};
  for (const event of ["select", "filter", "weigh", "claimed", "move"]) {
    const names = (chains[event] || []).map((p) => p.name).join(", ");
    if (names) row(table, event + " chain", cell("service", "plugin_chains." + event, names, "state"));
  }
  for (const [event, names] of Object.entries(stats.plugins || {}).sort()) {
    for (const [plugin, p] of Object.entries(names).sort()) {
      const label = "plugin " + plugin + " (" + event + ")";
      const key = "plugins." + event + "." + plugin + ".";
      row(table, label + " calls", cell("service", key + "calls", p.calls, "count"));
      row(table, label + " denials", cell("service", key + "denials", p.denials, "count"));
      row(table, label + " failures",
        cell("service", key + "failures", p.errors + p.timeouts + p.refused, "count"));
      row(table, label + " breaker", cell("service", key + "breaker", p.breaker, "state"));
    }
  }
  const trees = stats.provider_trees;
  if (trees) {
    for (const [outcome, n] of Object.entries(trees).sort()) {
      row(table, "provider-tree requests: " + outcome,
        cell("service", "provider_trees." + outcome, n, "count"));
    }
  }
  const rebalance = stats.rebalance;
  if (rebalance) {
    row(table, "rebalance plans", cell("service", "rebalance.plans", rebalance.plans, "count"));
    row(table, "rebalance moves planned",
      cell("service", "rebalance.moves_planned", rebalance.moves_planned, "count"));
    const refused = Object.values(rebalance.refused || {}).reduce((a, b) => a + b, 0);
    row(table, "rebalance plans refused", cell("service", "rebalance.refused", refused, "count"));
  }
  div.append(h, table);
  return div;
}

function remember(now, backends) {
  history.t.push(now);
  for (const [name, b] of Object.entries(backends)) {
    if (!history.byBackend[name]) history.byBackend[name] = {};
    const series = history.byBackend[name];
    const { f } = figures(b);
    for (const [, metric] of CHARTS) {
      if (!series[metric]) series[metric] = new Array(history.t.length - 1).fill(null);
      series[metric].push(f[metric] === undefined ? null : f[metric]);
    }
  }
  // Backends gone from the answer (never: stats survive switches) still get a point.
  for (const series of Object.values(history.byBackend)) {
    for (const [, metric] of CHARTS) {
      while (series[metric].length < history.t.length) series[metric].push(null);
    }
  }
  while (history.t.length && history.t[0] < now - HISTORY_S) {
    history.t.shift();
    for (const series of Object.values(history.byBackend)) {
      for (const [, metric] of CHARTS) series[metric].shift();
    }
  }
}

function drawCharts() {
  const names = Object.keys(history.byBackend).sort();
  const key = names.join(",");
  for (const [id, metric] of CHARTS) {
    const data = [history.t, ...names.map((n) => history.byBackend[n][metric])];
    if (key !== chartBackends && charts[id]) {
      charts[id].destroy();
      delete charts[id];
    }
    if (!charts[id]) {
      const el = document.getElementById(id);
      el.textContent = "";
      charts[id] = new uPlot({
        width: Math.max(300, el.clientWidth - 10),
        height: 220,
        scales: { x: { time: true } },
        series: [{}, ...names.map((n, i) => ({ label: n, stroke: colour(n, i), width: 2, spanGaps: true }))],
        axes: [{}, { size: 60 }],
      }, data, el);
    } else {
      charts[id].setData(data);
    }
  }
  chartBackends = key;
}

// Flex ([flex] enabled): the controller's penalty P and QoS Q(t) per period, from the periods
// /v1/stats keeps (`flex.history`, the service's record, not only what this page has seen);
// each period also in the chart's data-periods as [at_ms, P, Q(t)], for tests.
let flexChart = null;

function drawFlex(flex) {
  const figure = document.getElementById("flex-figure");
  const el = document.getElementById("chart-flex");
  if (!flex || !flex.enabled) {
    figure.hidden = true;
    if (flexChart) flexChart.destroy();
    flexChart = null;
    delete el.dataset.periods;
    return;
  }
  figure.hidden = false;
  const periods = (flex.history || []).map((p) => [p.at_ms, p.penalty, p.qos ?? null]);
  el.dataset.periods = JSON.stringify(periods);
  const data = [periods.map((p) => p[0] / 1000), periods.map((p) => p[1]), periods.map((p) => p[2])];
  if (flexChart) {
    flexChart.setData(data);
    return;
  }
  el.textContent = "";
  flexChart = new uPlot({
    width: Math.max(300, el.clientWidth - 10),
    height: 220,
    scales: { x: { time: false }, p: {}, q: { range: [0, 1] } },
    series: [
      { label: "s" },
      { label: "P", stroke: SPARE[0], width: 2, scale: "p" },
      { label: "Q(t)", stroke: COLOURS.filter, width: 2, scale: "q" },
    ],
    axes: [{}, { scale: "p", size: 60 }, { scale: "q", side: 1, size: 60 }],
  }, data, el);
}

// Under token auth (`[auth] strategy = "token"` or "keystone") /v1/stats needs an
// X-Auth-Token: the page asks for it once and keeps it for this tab only.
let token = sessionStorage.getItem("parasol-token") || "";

function askForToken(status) {
  document.getElementById("token-form").hidden = false;
  document.getElementById("error").textContent = token
    ? "/v1/stats refused the token (" + status + "): enter another"
    : "/v1/stats needs a token (" + status + "): enter it above";
}

document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  token = document.getElementById("token").value.trim();
  sessionStorage.setItem("parasol-token", token);
  document.getElementById("token-form").hidden = true;
  refresh();
});

async function refresh() {
  try {
    const headers = token ? { "X-Auth-Token": token } : {};
    const res = await fetch("/v1/stats", { cache: "no-store", headers });
    if (res.status === 401 || res.status === 403) {
      askForToken(res.status);
      return;
    }
    if (!res.ok) throw new Error("/v1/stats answered " + res.status);
    const stats = await res.json();
    const now = Date.now() / 1000;
    const section = document.getElementById("backends");
    section.textContent = "";
    Object.keys(stats.backends).sort().forEach((name, i) => {
      section.append(card(name, i, stats.backends[name], stats.active_backend));
    });
    section.append(serviceCard(stats));
    const active = document.getElementById("active");
    active.textContent = stats.active_backend;
    active.dataset.value = stats.active_backend;
    const broker = stats.broker || {};
    document.getElementById("broker").textContent =
      !broker.configured ? "not configured" : broker.connected ? "connected" : "disconnected";
    const anyWindow = Object.values(stats.backends).find((b) => b.window);
    if (anyWindow) document.getElementById("window-seconds").textContent = anyWindow.window.seconds;
    remember(now, stats.backends);
    drawCharts();
    drawFlex(stats.flex);
    document.getElementById("updated").textContent = new Date().toLocaleTimeString();
    document.getElementById("error").textContent = "";
    redraws += 1;
    document.body.dataset.redraws = String(redraws);
  } catch (e) {
    document.getElementById("error").textContent = String(e);
  }
}

document.getElementById("history-minutes").textContent = HISTORY_S / 60;
document.getElementById("interval-seconds").textContent = INTERVAL_MS / 1000;
refresh();
setInterval(refresh, INTERVAL_MS);
