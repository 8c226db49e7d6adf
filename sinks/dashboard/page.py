"""The dashboard's single page: HTML, CSS and JS inline (no build step, no CDN: the network may be
closed). It polls ``/api/summary`` every second and redraws; ``#status`` says when it last did.

Layout, top to bottom: the live figures (the header: transactions per second, transactions read,
consumer lag, alerts, open cases, overall p50/p99 latency; under it alerts and p50/p99 per detector),
then the open cases ``CASES_PER_PAGE`` at a time with newer/older buttons, so however many cases are
open the live figures stay in view, each with buttons to mark it fraud or not fraud (``verdicts.py``);
then the latest alerts, alerts per minute, each detector's parameters in force and each query's late
events. The transactions rate is the page's own: the change of ``transactions.read`` between polls."""

from sinks.dashboard.summary import CASES_PER_PAGE

PAGE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Fraud detection: live</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f5f6f8; color: #1d2330; }
  header { background: #1d2330; color: #fff; padding: 10px 20px; }
  .title { display: flex; gap: 16px; align-items: baseline; }
  header h1 { font-size: 18px; margin: 0; }
  .kpis { display: flex; gap: 26px; flex-wrap: wrap; margin-top: 6px; }
  .kpi b { font-size: 20px; margin-right: 4px; }
  .kpi small { color: #aab; }
  #live { padding: 8px 20px 0; }
  #detectors { width: auto; min-width: 560px; background: #fff; box-shadow: 0 1px 2px #0002; }
  #detectors td.num, #detectors th.num { text-align: right; white-space: nowrap; }
  #latest td:last-child { white-space: nowrap; }
  .note { font-size: 12px; margin: 4px 0 0; }
  main { display: grid; grid-template-columns: 3fr 2fr; gap: 16px; padding: 12px 20px 16px; }
  section.box { background: #fff; border-radius: 6px; padding: 12px 14px; box-shadow: 0 1px 2px #0002; }
  section.wide { grid-column: 1 / -1; }
  h2 { font-size: 15px; margin: 0 0 8px; display: flex; gap: 12px; align-items: baseline; }
  .pager { font-size: 13px; font-weight: normal; display: flex; gap: 8px; align-items: baseline; }
  .pager button { font: inherit; padding: 1px 8px; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 4px 6px; border-bottom: 1px solid #e6e8ec; vertical-align: top; }
  th { font-weight: 600; color: #555; font-size: 12px; }
  .sev { border-radius: 3px; padding: 1px 6px; color: #fff; font-size: 12px; white-space: nowrap; }
  .sev-low { background: #6b8e23; } .sev-medium { background: #d39e00; }
  .sev-high { background: #e8590c; } .sev-critical { background: #c92a2a; }
  .reasons { margin: 0; padding-left: 16px; font-size: 12px; color: #333; }
  .bar { display: inline-block; height: 10px; background: #4c6ef5; vertical-align: middle; }
  .muted { color: #888; } .error { color: #ff8787; }
  td.verdict button { font-size: 11px; padding: 0 4px; margin-left: 3px; }
  code { font-size: 12px; }
</style>
</head>
<body>
<header>
  <div class="title"><h1>Fraud detection: live</h1>
    <span id="status" class="muted" data-polls="0">connecting...</span></div>
  <div class="kpis">
    <span class="kpi" title="rows the detector job read per second, from its progress in Redis"><b id="kpi-rate">-</b>transactions/s</span>
    <span class="kpi" title="transactions read by the detector job since it started"><b id="kpi-read">-</b>transactions read</span>
    <span class="kpi" title="records the slowest detector query is behind the end of the transactions topic"><b id="kpi-lag">-</b>consumer lag</span>
    <span class="kpi"><b id="kpi-alerts">-</b>alerts</span>
    <span class="kpi"><b id="kpi-open">-</b>open cases</span>
    <span class="kpi" title="transaction into Kafka to alert written, all detectors"><b id="kpi-p50">-</b>p50 latency</span>
    <span class="kpi" title="transaction into Kafka to alert written, all detectors"><b id="kpi-p99">-</b>p99 latency</span>
  </div>
</header>
<section id="live">
  <table id="detectors"><thead><tr><th>detector</th><th class="num">alerts</th><th class="num">p50 latency</th>
    <th class="num">p99 latency</th><th class="num">alerts with a latency</th>
    <th class="num" title="fraud verdicts / cases judged by analysts that the detector alerted in">precision (analysts)</th>
    </tr></thead><tbody></tbody></table>
  <p class="note muted" id="latency-note">Latency: from the triggering transaction entering Kafka to the alert
    being written (its <code>detected_at</code> &minus; <code>ingested_at</code>), over the newest
    <span id="latency-window">-</span> alerts; alerts
    without <code>ingested_at</code> have no figure.</p>
</section>
<main>
  <section class="box wide">
    <h2>Open cases <span class="pager"><button id="cases-newer" type="button">&lsaquo; newer</button>
      <span id="cases-range" class="muted">-</span>
      <button id="cases-older" type="button">older &rsaquo;</button></span>
      <span id="verdict-status" class="muted"></span></h2>
    <table id="cases"><thead><tr><th>severity</th><th>case</th><th>card</th><th>alerts</th>
      <th>detectors</th><th>reasons</th><th>merchants</th><th>updated</th><th>verdict</th></tr></thead>
      <tbody></tbody></table>
  </section>
  <section class="box">
    <h2>Latest alerts</h2>
    <table id="latest"><thead><tr><th>detected</th><th>detector</th><th>card</th><th>score</th>
      <th>reason</th><th>latency</th></tr></thead><tbody></tbody></table>
  </section>
  <section class="box">
    <h2>Alerts per detector per minute</h2>
    <table id="per-minute"><thead></thead><tbody></tbody></table>
  </section>
  <section class="box wide">
    <h2>Detector parameters <span class="pager muted">changed with <code>python -m detectors params set</code></span></h2>
    <table id="params"><thead><tr><th>detector</th><th>version</th><th>parameters</th><th>changed</th>
      <th>by, why</th><th>applied</th></tr></thead><tbody></tbody></table>
  </section>
  <section class="box wide">
    <h2>Late events dropped by each query's watermark</h2>
    <table id="queries"><thead><tr><th>query</th><th>rows read</th><th>dropped (late)</th><th>share</th>
      <th>invalid</th><th>watermark</th></tr></thead><tbody></tbody></table>
  </section>
</main>
<script>
"use strict";
const PER_PAGE = __CASES_PER_PAGE__;
const RATE_WINDOW_MS = 10000;
let casesPage = 1, lastPages = 1, requested = 0, rendered = 0;
const verdicts = {};     // case_id -> {verdict}: the server's, and the ones marked here
const readings = [];     // [time ms, transactions read]: the rate is the page's own

function el(tag, attrs, children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const child of children || []) node.appendChild(child);
  return node;
}
function td(text, attrs) { return el("td", Object.assign({text: text == null ? "" : String(text)}, attrs || {})); }
function ms(v) {
  if (v == null) return "\u2014";
  const a = Math.abs(v);
  return a < 1000 ? Math.round(v) + " ms" : (a < 100000 ? (v / 1000).toFixed(2) : (v / 1000).toFixed(0)) + " s";
}
function count(v) { return v == null ? "\u2014" : Number(v).toLocaleString("en-US"); }
function hhmmss(iso) { return iso ? iso.slice(11, 19) : ""; }
function fill(tbody, rows) { tbody.replaceChildren(...rows); }
function text(id, value) { document.getElementById(id).textContent = value; }

function rate(read) {
  const now = Date.now();
  if (read == null) return null;
  if (readings.length && read < readings[readings.length - 1][1]) readings.length = 0;  // the job restarted
  readings.push([now, read]);
  while (readings.length > 2 && now - readings[1][0] >= RATE_WINDOW_MS) readings.shift();
  const [t0, r0] = readings[0];
  return now - t0 >= 1500 ? (read - r0) * 1000 / (now - t0) : null;
}

function renderLive(data) {
  const tx = data.transactions || {};
  const perSecond = rate(tx.read);
  text("kpi-rate", perSecond == null ? "\u2014" : count(Math.round(perSecond)));
  text("kpi-read", count(tx.read));
  text("kpi-lag", count(tx.offsets_behind_latest));
  document.getElementById("kpi-lag").title = tx.offsets_behind_latest == null ?
    "the detector job does not publish it (offsets_behind_latest in its progress)" : "";
  const byDetector = data.alerts_by_detector || {};
  text("kpi-alerts", count(Object.values(byDetector).reduce((a, b) => a + b, 0)));
  text("kpi-open", count(data.open_cases));
  const overall = data.latency.overall;
  text("kpi-p50", ms(overall.p50_ms));
  text("kpi-p99", ms(overall.p99_ms));
  text("latency-window", count(data.latency.alerts));
  const judged = data.precision_by_verdicts || {};
  const names = [...new Set([...Object.keys(byDetector), ...Object.keys(data.latency.detectors),
                             ...Object.keys(judged)])].sort();
  fill(document.querySelector("#detectors tbody"), names.map(name => {
    const l = data.latency.detectors[name] || {p50_ms: null, p99_ms: null, count: 0, without: 0};
    return el("tr", {"data-detector": name}, [
      td(name), td(count(byDetector[name] || 0), {class: "num alerts"}),
      td(ms(l.p50_ms), {class: "num p50"}), td(ms(l.p99_ms), {class: "num p99"}),
      td(l.count + " of " + (l.count + l.without), {class: "num samples"}),
      td(judged[name] ? judged[name].precision.toFixed(2) + " (" + judged[name].fraud + " of " +
         judged[name].judged + ")" : "\u2014", {class: "num precision"}),
    ]);
  }));
}

function renderCases(data) {
  const p = data.cases_page;
  casesPage = p.page; lastPages = p.pages;
  text("cases-range", p.total ? p.first + "\u2013" + p.last + " of " + count(p.total) + " (page " + p.page +
       " of " + p.pages + ")" : "none");
  document.getElementById("cases-newer").disabled = p.page <= 1;
  document.getElementById("cases-older").disabled = p.page >= p.pages;
  fill(document.querySelector("#cases tbody"), data.cases.map(c => el("tr",
    {"data-case-id": c.case_id, "data-card-id": c.card_id}, [
      el("td", {}, [el("span", {class: "sev sev-" + c.severity, text: c.severity + " " + c.score.toFixed(2)})]),
      el("td", {}, [el("code", {text: c.case_id.slice(0, 10)})]),
      td(c.card_id), td(c.alert_count), td(c.detectors.join(", ")),
      el("td", {}, [el("ul", {class: "reasons"}, c.reasons.map(r => el("li", {text: r})))]),
      td(c.merchants.join(", ")), td(hhmmss(c.updated_at)), verdictCell(c.case_id, verdicts[c.case_id]),
    ])));
}

function verdictCell(caseId, given) {
  const shown = given ? given.verdict.replace("_", " ") : "";
  return el("td", {class: "verdict"}, [
    el("span", {class: "verdict-given", text: shown}),
    el("button", {type: "button", "data-verdict": "fraud", "data-case": caseId, text: "fraud"}),
    el("button", {type: "button", "data-verdict": "not_fraud", "data-case": caseId, text: "not fraud"}),
  ]);
}

async function markCase(caseId, verdict) {
  const status = document.getElementById("verdict-status");
  try {
    const response = await fetch("/api/verdicts", {method: "POST", headers: {"Content-Type": "application/json"},
                                                   body: JSON.stringify({case_id: caseId, verdict: verdict})});
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.status);
    status.className = "muted";
    status.textContent = "case " + caseId.slice(0, 10) + " marked " + verdict.replace("_", " ");
    verdicts[caseId] = {verdict: verdict};
  } catch (err) {
    status.className = "error";
    status.textContent = "verdict not recorded: " + err.message;
  }
  refresh();
}

function renderParams(params) {
  fill(document.querySelector("#params tbody"), Object.entries(params || {}).map(([name, p]) => el("tr",
    {"data-detector": name}, [
      td(name), td("v" + p.version, {class: "version"}),
      td(Object.entries(p.params).map(([k, v]) => k + "=" + (Array.isArray(v) ? v.join(",") : v)).join("  ")),
      td(p.set_at ? p.set_at.slice(0, 19).replace("T", " ") : "defaults in the code"),
      td(p.author ? p.author + ": " + p.reason : ""), td(hhmmss(p.applied_at)),
    ])));
}

function render(data) {
  Object.assign(verdicts, data.verdicts || {});
  renderLive(data);
  renderCases(data);
  renderParams(data.params);
  fill(document.querySelector("#latest tbody"), data.latest_alerts.map(a => el("tr",
    {"data-alert-id": a.alert_id}, [
      td(hhmmss(a.detected_at)), td(a.detector), td(a.card_id), td(Number(a.score).toFixed(2)),
      td(a.reason), td(ms(a.latency_ms)),
    ])));

  const pm = data.alerts_per_minute;
  const max = Math.max(1, ...Object.values(pm.detectors).flat());
  document.querySelector("#per-minute thead").replaceChildren(
    el("tr", {}, [el("th", {text: "detector"}), ...pm.minutes.map(m => el("th", {text: m}))]));
  fill(document.querySelector("#per-minute tbody"), Object.entries(pm.detectors).map(([d, counts]) =>
    el("tr", {"data-detector": d}, [td(d), ...counts.map(n => el("td", {title: n + " alerts"}, [
      el("span", {class: "bar", style: "width:" + Math.round(40 * n / max) + "px"}),
      document.createTextNode(" " + n)]))])));

  fill(document.querySelector("#queries tbody"), (data.queries || []).map(q => el("tr", {"data-query": q.query}, [
    td(q.query), td(q.input_rows), td(q.rows_dropped_by_watermark),
    td(q.dropped_share == null ? "-" : (100 * q.dropped_share).toFixed(2) + " %"),
    td(q.invalid_records), td(hhmmss(q.watermark)),
  ])));
}

async function refresh() {
  const status = document.getElementById("status");
  const mine = ++requested;
  try {
    const response = await fetch("/api/summary?page=" + casesPage + "&per_page=" + PER_PAGE, {cache: "no-store"});
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.status);
    if (mine < rendered) return;          // an older answer overtaken by a newer one
    rendered = mine;
    render(data);
    status.className = "muted";
    status.textContent = "updated " + new Date().toISOString().slice(11, 19) + " UTC";
  } catch (err) {
    status.className = "error";
    status.textContent = "no data: " + err.message;
  }
  status.dataset.polls = String(Number(status.dataset.polls) + 1);
}
async function poll() { await refresh(); setTimeout(poll, 1000); }
function turn(step) { casesPage = Math.min(lastPages, Math.max(1, casesPage + step)); refresh(); }
document.getElementById("cases-newer").addEventListener("click", () => turn(-1));
document.getElementById("cases-older").addEventListener("click", () => turn(1));
document.querySelector("#cases tbody").addEventListener("click", event => {
  const button = event.target.closest("button[data-verdict]");
  if (button) markCase(button.dataset.case, button.dataset.verdict);
});
poll();
</script>
</body>
</html>
""".replace("__CASES_PER_PAGE__", str(CASES_PER_PAGE))
