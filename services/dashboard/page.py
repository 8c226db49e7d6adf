"""The dashboard's single page: HTML, CSS and JS inline (no build step, no CDN: the network may be
closed). It polls ``/api/summary`` every second and redraws; ``#status`` says when it last did."""

PAGE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Fraud detection: live cases</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f5f6f8; color: #1d2330; }
  header { background: #1d2330; color: #fff; padding: 12px 20px; display: flex; gap: 28px;
           align-items: baseline; flex-wrap: wrap; }
  header h1 { font-size: 18px; margin: 0 12px 0 0; }
  .kpi b { font-size: 20px; margin-right: 4px; }
  main { display: grid; grid-template-columns: 3fr 2fr; gap: 16px; padding: 16px 20px; }
  section { background: #fff; border-radius: 6px; padding: 12px 14px; box-shadow: 0 1px 2px #0002; }
  section.wide { grid-column: 1 / -1; }
  h2 { font-size: 15px; margin: 0 0 8px; }
  table { border-collapse: collapse; width: 100%; }
  th, td { text-align: left; padding: 4px 6px; border-bottom: 1px solid #e6e8ec; vertical-align: top; }
  th { font-weight: 600; color: #555; font-size: 12px; }
  .sev { border-radius: 3px; padding: 1px 6px; color: #fff; font-size: 12px; }
  .sev-low { background: #6b8e23; } .sev-medium { background: #d39e00; }
  .sev-high { background: #e8590c; } .sev-critical { background: #c92a2a; }
  .reasons { margin: 0; padding-left: 16px; font-size: 12px; color: #333; }
  .bar { display: inline-block; height: 10px; background: #4c6ef5; vertical-align: middle; }
  .muted { color: #888; } .error { color: #c92a2a; }
  code { font-size: 12px; }
</style>
</head>
<body>
<header>
  <h1>Fraud detection: live cases</h1>
  <span class="kpi"><b id="kpi-open">-</b>open cases</span>
  <span class="kpi"><b id="kpi-p50">-</b>p50 latency</span>
  <span class="kpi"><b id="kpi-p99">-</b>p99 latency</span>
  <span class="kpi"><b id="kpi-alerts">-</b>recent alerts</span>
  <span id="status" class="muted" data-polls="0">connecting...</span>
</header>
<main>
  <section class="wide">
    <h2>Open cases</h2>
    <table id="cases"><thead><tr><th>severity</th><th>case</th><th>card</th><th>alerts</th>
      <th>detectors</th><th>reasons</th><th>merchants</th><th>updated</th></tr></thead>
      <tbody></tbody></table>
  </section>
  <section>
    <h2>Latest alerts</h2>
    <table id="latest"><thead><tr><th>detected</th><th>detector</th><th>card</th><th>score</th>
      <th>reason</th><th>latency</th></tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Alerts per detector per minute</h2>
    <table id="per-minute"><thead></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Late events dropped by each query's watermark</h2>
    <table id="queries"><thead><tr><th>query</th><th>rows read</th><th>dropped (late)</th><th>share</th>
      <th>invalid</th><th>watermark</th></tr></thead><tbody></tbody></table>
  </section>
</main>
<script>
"use strict";
function el(tag, attrs, children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const child of children || []) node.appendChild(child);
  return node;
}
function td(text, attrs) { return el("td", Object.assign({text: text == null ? "" : String(text)}, attrs || {})); }
function ms(v) { return v == null ? "-" : (v >= 1000 ? (v / 1000).toFixed(2) + " s" : v + " ms"); }
function hhmmss(iso) { return iso ? iso.slice(11, 19) : ""; }
function fill(tbody, rows) { tbody.replaceChildren(...rows); }

function render(data) {
  document.getElementById("kpi-open").textContent = data.open_cases;
  document.getElementById("kpi-p50").textContent = ms(data.latency_ms.p50);
  document.getElementById("kpi-p99").textContent = ms(data.latency_ms.p99);
  document.getElementById("kpi-alerts").textContent = data.latency_ms.count;

  fill(document.querySelector("#cases tbody"), data.cases.map(c => el("tr",
    {"data-case-id": c.case_id, "data-card-id": c.card_id}, [
      el("td", {}, [el("span", {class: "sev sev-" + c.severity, text: c.severity + " " + c.score.toFixed(2)})]),
      el("td", {}, [el("code", {text: c.case_id.slice(0, 10)})]),
      td(c.card_id), td(c.alert_count), td(c.detectors.join(", ")),
      el("td", {}, [el("ul", {class: "reasons"}, c.reasons.map(r => el("li", {text: r})))]),
      td(c.merchants.join(", ")), td(hhmmss(c.updated_at)),
    ])));

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

async function poll() {
  const status = document.getElementById("status");
  try {
    const response = await fetch("/api/summary", {cache: "no-store"});
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.status);
    render(data);
    status.className = "muted";
    status.textContent = "updated " + new Date().toISOString().slice(11, 19) + " UTC";
  } catch (err) {
    status.className = "error";
    status.textContent = "no data: " + err.message;
  }
  status.dataset.polls = String(Number(status.dataset.polls) + 1);
  setTimeout(poll, 1000);
}
poll();
</script>
</body>
</html>
"""
