// The dta console: plain JavaScript, no library. The collector serves it with a
// Content-Security-Policy that allows connections to its own origin only, so the page cannot
// load code from a CDN and needs none: every chart is a few canvas calls below, every table is
// built with textContent (store names and answers are never parsed as HTML).
"use strict";

// How often the stores table and the peers' counters are refreshed (ms).
const STORES_EVERY = 5000;
const PEERS_EVERY = 5000;
// The network overview: refresh interval (ms), worst flows and recent events shown.
const NETWORK_EVERY = 5000;
const NETWORK_FLOWS = 10;
const NETWORK_EVENTS = 20;
// The overview: how often the history is asked for its new points (ms).
const HISTORY_EVERY = 2000;
// The Append tail: entries asked per poll, entries kept on the page, poll interval (ms).
const TAIL_MAX = 64;
const TAIL_WINDOW = 200;
const TAIL_EVERY = 1000;

const $ = (id) => document.getElementById(id);

// --- access ----------------------------------------------------------------------------------

function token() {
  return sessionStorage.getItem("dta-token") || "";
}

// GET `path` from the collector: the parsed JSON answer, or an Error carrying the answer's
// `error` message (every error of the API is `{"error": "..."}`).
async function api(path) {
  const headers = {};
  if (token()) headers["Authorization"] = "Bearer " + token();
  const r = await fetch(path, { headers, cache: "no-store" });
  let body;
  try {
    body = await r.json();
  } catch (e) {
    throw new Error(`${r.status} ${r.statusText}: the answer is not JSON`);
  }
  if (r.status === 401) $("token-box").hidden = false;
  if (!r.ok) throw new Error(body && body.error ? body.error : `${r.status} ${r.statusText}`);
  return body;
}

function showError(id, e) {
  const el = $(id);
  if (e) {
    el.textContent = e.message || String(e);
    el.hidden = false;
  } else {
    el.textContent = "";
    el.hidden = true;
  }
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}

// --- stores ----------------------------------------------------------------------------------

// The previous poll of every store: {t, fillWords, appended}, for the rates.
let previous = {};
// Store names by kind (as the region header names it: key_write, append, ...).
let byKind = {};

// A region header's parameters as `key=value` pairs (the header is the truth for a store's
// parameters: the collector reads it from the region file).
function params(spec) {
  if (spec === null || typeof spec !== "object") return String(spec);
  const inner = Object.keys(spec).length === 1 && typeof Object.values(spec)[0] === "object"
    ? Object.values(spec)[0] : spec;
  // The kind is its own column.
  return Object.entries(inner)
    .filter(([k]) => k !== "kind")
    .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`)
    .join(" ");
}

function fmtRate(x) {
  if (x === null) return "measuring";
  return x >= 100 ? x.toFixed(0) : x.toFixed(1);
}

async function refreshStores() {
  let stores;
  try {
    stores = await api("/stores");
    showError("stores-error", null);
  } catch (e) {
    showError("stores-error", e);
    return;
  }
  const now = performance.now();
  const tbody = $("stores").tBodies[0];
  clear(tbody);
  byKind = {};
  const next = {};
  for (const s of stores) {
    const tr = document.createElement("tr");
    tr.dataset.store = s.name || (s.header && s.header.name);
    if (!s.available) {
      cell(tr, s.name);
      cell(tr, "unavailable");
      cell(tr, s.error).className = "error";
      tbody.appendChild(tr);
      continue;
    }
    const h = s.header;
    (byKind[h.kind] = byKind[h.kind] || []).push(h.name);
    intRole[h.name] = roleOf(h);
    windowed[h.name] = Boolean(h.spec && h.spec.windows > 0);
    cell(tr, h.name);
    cell(tr, h.kind);
    cell(tr, params(h.spec));
    cell(tr, (100 * s.fill).toFixed(2) + " %", "num");
    cell(tr, s.appended === null || s.appended === undefined ? "" : String(s.appended), "num");
    // Writes per second as the region shows them: appended entries for an Append store,
    // else words that became non-zero (a lower bound: rewriting a word is not seen).
    const words = s.fill * (s.data_bytes / 8);
    const p = previous[h.name];
    let rate = null;
    if (p && now > p.t) {
      const dt = (now - p.t) / 1000;
      rate = s.appended !== null && s.appended !== undefined
        ? (s.appended - p.appended) / dt
        : Math.max(0, words - p.words) / dt;
    }
    cell(tr, fmtRate(rate), "num");
    next[h.name] = { t: now, words, appended: s.appended };
    tbody.appendChild(tr);
  }
  previous = next;
  $("store-count").textContent = `(${stores.length})`;
  fillSelects();
}

// Stores by the INT sink's role their layout fits (dta_int::query::Role): name -> role.
let intRole = {};
// Whether a Key-Increment store keeps time windows (by name), from its region header.
let windowed = {};

// The INT role a store's header fits, or "".
function roleOf(h) {
  const inner = h.spec && typeof h.spec === "object" ? h.spec : {};
  if (h.kind === "append" && inner.record === "int-event") return "events";
  if (h.kind === "key_write" && inner.key_len === 13 && inner.data_len === 24) return "paths";
  if (h.kind === "key_increment" && inner.key_len === 6) return "hist";
  if (h.kind === "postcarding" && inner.key_len === 13) return "latency";
  return "";
}

// `names` with those fitting INT role `role` first (the usual name first among them): the
// default choice of the INT forms, as /int/network picks its defaults.
function rolesFirst(names, role) {
  const rank = (n) => (intRole[n] === role ? (n === role ? 0 : 1) : 2);
  return [...names].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

const KIND_OF = { kw: "key_write", ki: "key_increment", postcard: "postcarding", list: "append", sketch: "sketch_merge" };

// Fill a <select> with `names`, keeping its current choice when it is still there.
function options(sel, names) {
  const keep = sel.value;
  const have = Array.from(sel.options).map((o) => o.value).join("\n");
  if (have === names.join("\n")) return;
  clear(sel);
  for (const n of names) {
    const o = document.createElement("option");
    o.value = o.textContent = n;
    sel.appendChild(o);
  }
  if (names.includes(keep)) sel.value = keep;
}

function fillSelects() {
  const of = (k) => byKind[k] || [];
  options($("q-store"), of(KIND_OF[$("q-kind").value]));
  options($("t-store"), of("append"));
  options($("i-paths"), rolesFirst(of("key_write"), "paths"));
  options($("i-latency"), rolesFirst(of("postcarding"), "latency"));
  options($("i-events"), rolesFirst(of("append"), "events"));
  options($("h-store"), rolesFirst(of("key_increment"), "hist"));
  options($("n-events"), rolesFirst(of("append"), "events"));
  options($("n-paths"), rolesFirst(of("key_write"), "paths"));
  options($("n-hist"), rolesFirst(of("key_increment"), "hist"));
}

// --- queries ---------------------------------------------------------------------------------

function query(base, pairs) {
  const q = new URLSearchParams();
  for (const [k, v] of pairs) if (v !== "" && v !== undefined && v !== null) q.set(k, v);
  const s = q.toString();
  return s ? `${base}?${s}` : base;
}

function showKind() {
  const kind = $("q-kind").value;
  for (const l of document.querySelectorAll(".form label[data-for]")) {
    l.hidden = !l.dataset.for.split(" ").includes(kind);
  }
  options($("q-store"), byKind[KIND_OF[kind]] || []);
}

// An answer's top-level fields as a table (arrays and objects as JSON).
function answerTable(tbody, v) {
  clear(tbody);
  for (const [k, x] of Object.entries(v)) {
    const tr = document.createElement("tr");
    cell(tr, k);
    cell(tr, typeof x === "object" ? JSON.stringify(x) : String(x));
    tbody.appendChild(tr);
  }
}

async function runQuery() {
  const kind = $("q-kind").value;
  const store = $("q-store").value;
  const val = (id) => $(id).value.trim();
  const pairs = {
    kw: [["key", val("q-key")], ["redundancy", val("q-redundancy")], ["threshold", val("q-threshold")]],
    ki: [["key", val("q-key")], ["redundancy", val("q-redundancy")]],
    postcard: [["key", val("q-key")], ["values", val("q-values")]],
    list: [["list", val("q-list")], ["tail", val("q-tail")], ["max", val("q-max")]],
    sketch: [["key", val("q-key")]],
  }[kind];
  $("q-result").textContent = "";
  clear($("q-table").tBodies[0]);
  showError("q-error", null);
  try {
    if (!store) throw new Error(`no ${KIND_OF[kind]} store on this collector`);
    const v = await api(query(`/query/${kind}/${encodeURIComponent(store)}`, pairs));
    answerTable($("q-table").tBodies[0], v);
    $("q-result").textContent = JSON.stringify(v, null, 2);
  } catch (e) {
    showError("q-error", e);
  }
}

// --- Append tail -----------------------------------------------------------------------------

let tail = null;

function stopTail(why) {
  if (tail) clearTimeout(tail.timer);
  tail = null;
  $("t-start").disabled = false;
  $("t-stop").disabled = true;
  $("t-state").textContent = why || "stopped";
}

// A decoded Append entry as one line: its type, its time, then its fields.
function fmtRecord(d) {
  const t = d.time_ns !== undefined ? d.time_ns : d.last_ns;
  const rest = Object.entries(d)
    .filter(([k]) => !["type", "seq", "time_ns", "last_ns"].includes(k))
    .map(([k, x]) => `${k}=${typeof x === "object" ? JSON.stringify(x) : x}`);
  return [d.type || "", t !== undefined ? fmtTime(t) : "", ...rest].filter((x) => x).join(" ");
}

async function pollTail() {
  const t = tail;
  if (!t) return;
  try {
    const v = await api(query(`/query/list/${encodeURIComponent(t.store)}`,
      [["list", t.list], ["tail", t.next], ["max", TAIL_MAX]]));
    if (tail !== t) return;
    showError("t-error", null);
    const ol = $("t-entries");
    let seq = v.next_tail - v.entries.length;
    v.entries.forEach((e, i) => {
      const li = document.createElement("li");
      li.value = seq++;
      // Decoded by the store's record layout where it has one; the bytes as hex otherwise.
      const d = v.decoded ? v.decoded[i] : null;
      li.textContent = d ? fmtRecord(d) : e;
      li.title = e;
      ol.appendChild(li);
    });
    while (ol.children.length > TAIL_WINDOW) ol.removeChild(ol.firstChild);
    t.missed += v.missed || 0;
    t.next = v.next_tail;
    $("t-state").textContent = `following ${t.store} list ${t.list}: next entry ${t.next}` +
      (t.missed ? `, ${t.missed} overwritten before they were read` : "");
    ol.scrollTop = ol.scrollHeight;
  } catch (e) {
    showError("t-error", e);
    stopTail("stopped on error");
    return;
  }
  t.timer = setTimeout(pollTail, TAIL_EVERY);
}

async function startTail() {
  stopTail();
  const store = $("t-store").value;
  const list = $("t-list").value.trim() || "0";
  showError("t-error", null);
  if (!store) return showError("t-error", new Error("no Append store on this collector"));
  clear($("t-entries"));
  // From the oldest entry held, TAIL_MAX per poll; the page keeps the newest TAIL_WINDOW.
  tail = { store, list, next: undefined, missed: 0, timer: null };
  $("t-start").disabled = true;
  $("t-stop").disabled = false;
  pollTail();
}

// --- charts ----------------------------------------------------------------------------------

// A number with an SI suffix: 1500 -> "1.5k", 2097152 -> "2.1M".
function fmtNum(v) {
  if (v === null || v === undefined) return "";
  const a = Math.abs(v);
  for (const [d, u] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (a >= d) return `${+(v / d).toFixed(a / d >= 100 ? 0 : 1)}${u}`;
  }
  if (a === 0 || a >= 100) return String(Math.round(v));
  return String(+v.toFixed(a >= 10 ? 1 : 2));
}

// A tick step of about `raw`: 1, 2 or 5 times a power of ten.
function niceStep(raw) {
  if (!(raw > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

// What both charts draw first: a white canvas, the y axis from 0 up to the 1-2-5 tick at or
// above `hi` with its grid lines and labels, and `unit` above it, inside margins `m` ({left,
// right, top, bottom}). The context, the canvas's size and the value-to-pixel map.
function frame(canvas, m, hi, unit) {
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height;
  ctx.clearRect(0, 0, W, H);
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, W, H);
  const step = niceStep((hi || 1) / 4);
  const max = step * Math.max(1, Math.ceil((hi || 1) / step));
  const y = (v) => H - m.bottom - ((H - m.bottom - m.top) * v) / max;
  ctx.font = "11px sans-serif";
  ctx.lineWidth = 1;
  ctx.strokeStyle = "#e4e4e4";
  ctx.fillStyle = "#333";
  ctx.textAlign = "right";
  for (let v = 0; v <= max + step / 2; v += step) {
    ctx.beginPath();
    ctx.moveTo(m.left, y(v));
    ctx.lineTo(W - m.right, y(v));
    ctx.stroke();
    ctx.fillText(fmtNum(v), m.left - 4, y(v) + 4);
  }
  if (unit) {
    ctx.textAlign = "left";
    ctx.fillText(unit, 2, m.top - 4);
  }
  return { ctx, W, H, y };
}

// The axis lines inside margins `m`.
function axes(ctx, m, W, H) {
  ctx.strokeStyle = "#888";
  ctx.beginPath();
  ctx.moveTo(m.left, m.top);
  ctx.lineTo(m.left, H - m.bottom);
  ctx.lineTo(W - m.right, H - m.bottom);
  ctx.stroke();
}

// A bar chart of `values` labelled `labels` on `canvas`, drawn by hand (no chart library: the
// page loads nothing from elsewhere). A label is drawn only where it does not overlap the one
// before it; the y axis has ticks in `unit`; `caption` names the x axis.
function bars(canvas, labels, values, unit, caption) {
  const m = { left: 60, bottom: caption ? 46 : 30, top: 16, right: 10 };
  const { ctx, W, H, y } = frame(canvas, m, Math.max(1, ...values.filter((v) => v !== null)), unit);
  const { left, bottom, right } = m;
  const n = Math.max(1, values.length);
  const slot = (W - left - right) / n;
  axes(ctx, m, W, H);
  ctx.textAlign = "center";
  let lastEnd = -Infinity;
  values.forEach((v, i) => {
    const x = left + i * slot;
    if (v !== null) {
      ctx.fillStyle = "#2a6fdb";
      ctx.fillRect(x + slot * 0.15, y(v), slot * 0.7, H - bottom - y(v));
    }
    ctx.fillStyle = "#333";
    const w = ctx.measureText(labels[i]).width;
    const cx = x + slot / 2;
    if (cx - w / 2 > lastEnd + 6) {
      ctx.fillText(labels[i], cx, H - bottom + 14);
      lastEnd = cx + w / 2;
    }
  });
  if (caption) ctx.fillText(caption, left + (W - left - right) / 2, H - 6);
}

// --- INT -------------------------------------------------------------------------------------

async function runPath() {
  const paths = $("i-paths").value, latency = $("i-latency").value;
  const flow = $("i-flow").value.trim();
  const tbody = $("i-hops").tBodies[0];
  clear(tbody);
  $("i-path").textContent = "";
  showError("i-error", null);
  const canvas = $("i-chart");
  canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
  try {
    if (!paths) throw new Error("no Key-Write store of paths on this collector");
    const p = await api(query(`/int/path/${encodeURIComponent(paths)}`, [["flow", flow]]));
    $("i-path").textContent = JSON.stringify(p, null, 2);
    if (p.status !== "found") throw new Error(`flow ${p.flow}: path ${p.status}`);
    const lat = [];
    for (let hop = 0; hop < p.path.length; hop++) {
      let h = null;
      if (latency) {
        h = await api(query(`/int/hop-latency/${encodeURIComponent(latency)}`, [
          ["flow", flow], ["hop", hop], ["values", $("i-values").value.trim()],
          ["divisor", $("i-divisor").value.trim()],
        ]));
      }
      const tr = document.createElement("tr");
      cell(tr, String(hop), "num");
      cell(tr, String(p.path[hop]), "num");
      cell(tr, h && h.latency !== null ? String(h.latency) : "", "num");
      cell(tr, h ? h.status : "no latency store");
      tbody.appendChild(tr);
      lat.push(h && h.latency !== null ? h.latency : null);
    }
    bars(canvas, p.path.map((n, i) => `hop ${i}: ${n}`), lat, "ns", "hop: switch (node id)");
    await flowOverTime(flow);
  } catch (e) {
    showError("i-error", e);
  }
}

// Most summaries and events of one flow the page asks for.
const FLOW_SUMMARIES = 360;
const FLOW_EVENTS = 20;

// The flow's summaries as path latency over time, and its events: GET /int/flows/{events}?flow=
// and /int/events/{events}?flow=, as `dta query int flows --flow` and `events --flow` give them.
async function flowOverTime(flow) {
  const events = $("i-events").value;
  const tbody = $("i-events-list").tBodies[0];
  clear(tbody);
  const canvas = $("i-time");
  canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
  if (!events) {
    $("i-time-state").textContent = "no Append store of events on this collector";
    return;
  }
  const s = await api(query(`/int/flows/${encodeURIComponent(events)}`, [
    ["flow", flow], ["max", FLOW_SUMMARIES],
  ]));
  const pts = s.flows.map((f) => [f.last_ns / 1e6, f.path_latency]).reverse();
  if (pts.length === 0) {
    $("i-time-state").textContent = "no summary of this flow yet: the sink writes one every " +
      "active timeout while it runs, and one when it leaves its cache";
  } else {
    const from = Math.min(pts[0][0], pts[pts.length - 1][0] - 60 * 1000);
    $("i-time-state").textContent = `${pts.length} summaries, ${fmtClock(pts[0][0], true)} to ` +
      `${fmtClock(pts[pts.length - 1][0], true)}; the latest: ${s.flows[0].packets} packets, ` +
      `path latency ${fmtNum(s.flows[0].path_latency)} ns` +
      (s.more > 0 ? `; ${s.more} older summaries not shown` : "") +
      partial(s, "older summaries are held than were read");
    lineChart(canvas, [{ name: "path latency", colour: COLOURS[0], points: pts }], from,
      pts[pts.length - 1][0] + 1000, "ns");
  }
  const e = await api(query(`/int/events/${encodeURIComponent(events)}`, [
    ["flow", flow], ["max", FLOW_EVENTS],
  ]));
  for (const ev of e.events) {
    const tr = document.createElement("tr");
    cell(tr, fmtTime(ev.time_ns));
    cell(tr, ev.kind);
    cell(tr, ev.hop === 255 ? "path" : String(ev.hop), "num");
    cell(tr, String(ev.node_id), "num");
    cell(tr, String(ev.value), "num");
    tbody.appendChild(tr);
  }
}

async function runHistogram() {
  const store = $("h-store").value;
  $("h-result").textContent = "";
  showError("h-error", null);
  const canvas = $("h-chart");
  canvas.getContext("2d").clearRect(0, 0, canvas.width, canvas.height);
  try {
    if (!store) throw new Error("no Key-Increment store on this collector");
    const v = await api(query(`/int/histogram/${encodeURIComponent(store)}`, [
      ["node", $("h-node").value.trim()], ["port", $("h-port").value.trim()],
      ["metric", $("h-metric").value],
      ["edges", $("h-edges").value.trim()], ["window", $("h-window").value.trim()],
    ]));
    $("h-result").textContent = JSON.stringify(v, null, 2);
    const unit = { hop_latency: "ns", queue_occupancy: "cells", egress_tx_util: "" }[v.metric] || "";
    bars(canvas, v.buckets.map((b) => fmtNum(b.lo)), v.buckets.map((b) => b.count), "samples",
      `${v.metric}${unit ? " (" + unit + ")" : ""}${v.port === undefined ? "" : " at port " + v.port}, ` +
      `each bucket's lower edge; ${fmtWindows(v.windows)}`);
  } catch (e) {
    showError("h-error", e);
  }
}

// --- the network now --------------------------------------------------------------------------

// What an answer that did not cover everything asked says of itself (nothing when complete).
function partial(answer, what) {
  return answer && answer.complete === false ? `; PARTIAL: ${what}` : "";
}

// A time in Unix nanoseconds (the sink's clock) as the one clock format of the page.
function fmtTime(ns) {
  return fmtClock(ns / 1e6, true);
}

function fmtWindows(ws) {
  if (!ws || ws.length === 0) return "histograms: since the store was created (no windows)";
  const open = ws[ws.length - 1].open ? ", the last still open" : "";
  return `histograms: ${ws.length} window(s), ${fmtClock(ws[0].start_ms, true)} to ` +
    `${fmtClock(ws[ws.length - 1].end_ms, true)}${open}`;
}

// The start (Unix ms) of the time a window choice asks for: `last:N{s,m,h,d}` from now, else
// the first window the network answer read (`current`, `all`), else nothing (all held).
function windowSince(choice, net) {
  const m = /^last:(\d+)(s|m|h|d)$/.exec(choice);
  if (m) return Date.now() - Number(m[1]) * { s: 1e3, m: 6e4, h: 3.6e6, d: 8.64e7 }[m[2]];
  return net.windows && net.windows.length > 0 ? net.windows[0].start_ms : undefined;
}

// The raw rows of an episode: GET /int/events with its switch, kind and time, as `dta query
// int events --node N --kind K --since-ms A --until-ms B` gives them.
async function showEpisodeRows(events, ep) {
  const ev = $("n-events-list").tBodies[0];
  const rows = await api(query(`/int/events/${encodeURIComponent(events)}`, [
    ["kind", ep.kind], ["node", ep.node_id], ["since_ms", Math.floor(ep.start_ns / 1e6)],
    ["until_ms", Math.floor(ep.end_ns / 1e6)], ["max", NETWORK_EVENTS],
  ]));
  $("n-rows-of").textContent = `${ep.kind} at switch ${ep.node_id}, ${fmtTime(ep.start_ns)} to ` +
    `${fmtTime(ep.end_ns)}: ${rows.events.length} of ${ep.count} rows` +
    (rows.complete ? "" : " (the newest)");
  clear(ev);
  for (const e of rows.events) {
    const tr = document.createElement("tr");
    cell(tr, fmtTime(e.time_ns));
    cell(tr, e.kind);
    cell(tr, e.flow);
    cell(tr, e.hop === 255 ? "path" : String(e.hop), "num");
    cell(tr, String(e.node_id), "num");
    cell(tr, String(e.value), "num");
    ev.appendChild(tr);
  }
}

// The switches and links (most congested first by the measure chosen), the worst flows and the
// episodes of the window chosen: the answers of GET /int/network, /int/flows?top=worst&since_ms=
// and /int/episodes, as `dta query int network|flows|episodes` gives them; an episode's rows on
// a click.
async function refreshNetwork() {
  const events = $("n-events").value, paths = $("n-paths").value, hist = $("n-hist").value;
  if (!events || !paths || !hist) return;
  const sw = $("n-switches").tBodies[0], fl = $("n-flows").tBodies[0];
  const eps = $("n-episodes").tBodies[0];
  try {
    const choice = $("n-window").value;
    // A store of one cumulative table answers since it was created (the answer says so).
    const net = await api(query("/int/network", [
      ["events", events], ["paths", paths], ["hist", hist],
      ["window", windowed[hist] === false ? "all" : choice],
      ["rank", $("n-rank").value],
    ]));
    const since = windowSince(choice, net);
    const flows = await api(query(`/int/flows/${encodeURIComponent(events)}`, [
      ["paths", paths], ["top", $("n-top").value], ["max", NETWORK_FLOWS],
      ["since_ms", since === undefined ? "" : Math.floor(since)],
    ]));
    const episodes = await api(query(`/int/episodes/${encodeURIComponent(events)}`, [
      ["since_ms", since === undefined ? "" : Math.floor(since)], ["max", NETWORK_EVENTS],
    ]));
    showError("n-error", null);
    $("n-windows").textContent = `${net.flows} flows read; ${net.store} ${fmtWindows(net.windows)}; ranked by ` +
      `${net.rank}` +
      (net.notes && net.notes.length > 0 ? `; ${net.notes.join("; ")}` : "") +
      partial(flows, `the flows cover summaries since ${flows.covered_from_ns ?
        fmtTime(flows.covered_from_ns) : "?"} only`) +
      (flows.more > 0 ? `; ${flows.more} more flows match beyond the ${NETWORK_FLOWS} shown` : "") +
      (episodes.more > 0 ? `; ${episodes.more} older episodes beyond the ${NETWORK_EVENTS} shown` : "") +
      (episodes.notes && episodes.notes.length > 0 ? `; ${episodes.notes.join("; ")}` : "");
    clear(sw);
    const n = (x) => (x === null || x === undefined ? "" : String(x));
    const score = (x) => (x === null || x === undefined ? "" :
      (/:over:/.test(net.rank) ? `${(100 * x).toFixed(1)} %` : String(x)));
    for (const s of net.switches) {
      const tr = document.createElement("tr");
      cell(tr, String(s.node_id), "num");
      cell(tr, score(s.score), "num");
      cell(tr, String(s.flows), "num");
      cell(tr, n(s.queue_p50), "num");
      cell(tr, n(s.queue_p99), "num");
      cell(tr, n(s.latency_p50), "num");
      cell(tr, n(s.latency_p99), "num");
      cell(tr, String(s.queue_samples), "num");
      sw.appendChild(tr);
    }
    clear(fl);
    for (const f of flows.flows) {
      const tr = document.createElement("tr");
      const a = cell(tr, f.flow);
      a.className = "link";
      a.addEventListener("click", () => {
        $("i-paths").value = paths;
        $("i-events").value = events;
        $("i-flow").value = f.flow;
        runPath();
        $("i-flow").scrollIntoView();
      });
      cell(tr, String(f.packets), "num");
      cell(tr, String(f.path_latency), "num");
      cell(tr, String(f.hops), "num");
      cell(tr, f.path ? f.path.join(" → ") : "");
      cell(tr, fmtTime(f.last_ns));
      fl.appendChild(tr);
    }
    clear(eps);
    for (const ep of episodes.episodes) {
      const tr = document.createElement("tr");
      const a = cell(tr, String(ep.node_id), "num link");
      a.addEventListener("click", () => showEpisodeRows(events, ep).catch((e) => showError("n-error", e)));
      cell(tr, ep.kind);
      cell(tr, fmtTime(ep.start_ns));
      cell(tr, `${((ep.end_ns - ep.start_ns) / 1e9).toFixed(1)} s`, "num");
      cell(tr, String(ep.peak), "num");
      cell(tr, String(ep.count), "num");
      cell(tr, String(ep.flows), "num");
      cell(tr, ep.peak_flow);
      eps.appendChild(tr);
    }
    $("n-episodes-none").hidden = episodes.episodes.length > 0;
    $("n-episode-counts").textContent = episodes.series.length === 0 ? "" :
      "crossings per switch and kind: " + episodes.series.slice(0, 8)
        .map((s) => `${s.node_id} ${s.kind} ${s.events} in ${s.episodes} episode(s)`).join("; ");
  } catch (e) {
    showError("n-error", e);
  }
}

// --- overview: the counters over time --------------------------------------------------------

// The charts, in the order shown: the history's chart name and what it shows. A chart is drawn
// once some source gave it a series.
const CHARTS = [
  ["ingest", "Reports applied, per primitive"],
  ["priority", "Reports, per priority"],
  ["loss", "Loss: sequence numbers never received and not recovered by NACKs; datagrams the kernel dropped at the INT sink's socket and at AF_XDP sockets"],
  ["nacks", "NACKs sent, and not sent (budget spent)"],
  ["shed", "Shed under overload: classifier, write meter, kernel"],
  ["rejects", "Rejected, by reason"],
  ["int", "INT sink: reports taken and events"],
  ["fill", "Store fill"],
  ["cluster", "Collectors ready (1) or not (0)"],
];
const COLOURS = ["#2a6fdb", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#0b7285", "#c2255c",
  "#5c940d", "#364fc7", "#a61e4d", "#495057", "#087f5b"];

// Series by key `source|family|label`: {meta, points: [[ms, value|null], ...]}.
const history = new Map();
let historyUntil = 0;

// A series' name in a legend: its source, the family without prefix and suffix, its label.
function seriesName(m) {
  const fam = m.family.replace(/^dta_(int_sink_translator_|translator_|int_|store_|collector_)?/, "").replace(/_total$/, "");
  return [m.source, fam, m.label].filter((x) => x).join(" ");
}

// A time as the axis shows it.
function fmtClock(ms, seconds) {
  const d = new Date(ms);
  const two = (x) => String(x).padStart(2, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}` + (seconds ? `:${two(d.getSeconds())}` : "");
}

// A line chart of `series` ([{name, colour, points}]) from `from` to `to` (Unix ms) on `canvas`:
// a time axis with clock labels, a y axis from 0 with 1-2-5 ticks in `unit`. A null point is a
// gap in the line (the source did not answer), never a 0.
function lineChart(canvas, series, from, to, unit) {
  const m = { left: 56, right: 10, top: 18, bottom: 24 };
  let hi = 0;
  for (const s of series) {
    for (const [t, v] of s.points) if (t >= from && v !== null && v > hi) hi = v;
  }
  const { ctx, W, H, y } = frame(canvas, m, hi, unit);
  const { left, right, top, bottom } = m;
  const x = (t) => left + ((W - left - right) * (t - from)) / (to - from);
  // Time ticks: the smallest round interval giving at most 8 of them.
  const span = (to - from) / 1000;
  const every = [5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600].find((e) => span / e <= 8) || 3600;
  ctx.textAlign = "center";
  for (let t = Math.ceil(from / (every * 1000)) * every * 1000; t <= to; t += every * 1000) {
    ctx.strokeStyle = "#e4e4e4";
    ctx.beginPath();
    ctx.moveTo(x(t), top);
    ctx.lineTo(x(t), H - bottom);
    ctx.stroke();
    ctx.fillText(fmtClock(t, every < 60), x(t), H - bottom + 14);
  }
  axes(ctx, m, W, H);
  ctx.lineWidth = 1.5;
  for (const s of series) {
    ctx.strokeStyle = s.colour;
    ctx.beginPath();
    let drawing = false;
    for (const [t, v] of s.points) {
      if (t < from || v === null) {
        drawing = false;
        continue;
      }
      if (drawing) ctx.lineTo(x(t), y(v));
      else ctx.moveTo(x(t), y(v));
      drawing = true;
    }
    ctx.stroke();
  }
}

async function refreshHistory() {
  let h;
  try {
    h = await api(`/console/history?since_ms=${historyUntil}`);
    showError("o-error", null);
  } catch (e) {
    showError("o-error", e);
    return;
  }
  for (const s of h.series) {
    const key = `${s.source}|${s.family}|${s.label}`;
    let e = history.get(key);
    if (!e) history.set(key, (e = { meta: s, points: [] }));
    for (const p of s.points) {
      e.points.push(p);
      if (p[0] > historyUntil) historyUntil = p[0];
    }
    // Keep an hour, as the collector does.
    const oldest = h.now_ms - 3600 * 1000;
    while (e.points.length && e.points[0][0] < oldest) e.points.shift();
  }
  $("o-state").textContent = history.size
    ? `${history.size} series, sampled every ${h.step_ms / 1000} s by the collector` +
      (h.series_dropped ? `; ${h.series_dropped} more not kept` : "")
    : "no source to sample: configure [collector] translator_metrics and int_sink_metrics";
  drawOverview(h.now_ms);
}

function drawOverview(now) {
  const box = $("o-charts");
  const to = now || Date.now();
  // The range chosen, shortened to what the collector holds (at least a minute).
  let oldest = to;
  for (const e of history.values()) if (e.points.length && e.points[0][0] < oldest) oldest = e.points[0][0];
  const from = Math.min(to - 60 * 1000, Math.max(to - Number($("o-range").value) * 1000, oldest));
  for (const [chart, title] of CHARTS) {
    const all = [...history.values()].filter((e) => e.meta.chart === chart);
    if (all.length === 0) continue;
    let div = box.querySelector(`div[data-chart="${chart}"]`);
    if (!div) {
      div = document.createElement("div");
      div.className = "chart";
      div.dataset.chart = chart;
      const h = document.createElement("h3");
      div.appendChild(h);
      const c = document.createElement("canvas");
      c.width = 520;
      c.height = 180;
      div.appendChild(c);
      const legend = document.createElement("p");
      legend.className = "legend";
      div.appendChild(legend);
      box.appendChild(div);
    }
    // Fill is a ratio; shown in percent.
    const pct = chart === "fill";
    const unit = pct ? "%" : all[0].meta.unit;
    div.querySelector("h3").textContent = `${title} (${unit})`;
    const series = all.map((e, i) => ({
      name: seriesName(e.meta),
      colour: COLOURS[i % COLOURS.length],
      points: pct ? e.points.map(([t, v]) => [t, v === null ? null : v * 100]) : e.points,
    }));
    lineChart(div.querySelector("canvas"), series, from, to, unit);
    div.querySelector("canvas").dataset.series = String(series.length);
    const legend = div.querySelector(".legend");
    clear(legend);
    // Series at 0 all along are counted, not listed (a reason nothing was rejected for).
    let quiet = 0;
    for (const s of series) {
      if (series.length > 4 && s.points.every((p) => p[0] < from || p[1] === 0)) {
        quiet++;
        continue;
      }
      const item = document.createElement("span");
      item.className = "series";
      item.style.color = s.colour;
      const shown = s.points.filter((p) => p[0] >= from);
      const last = shown[shown.length - 1];
      const latest = last === undefined ? "measuring" : last[1] === null ? "no answer" : `${fmtNum(last[1])} ${unit}`;
      const peak = Math.max(...shown.map((p) => (p[1] === null ? -Infinity : p[1])));
      item.textContent = `■ ${s.name}: ${latest}` + (peak > 0 ? ` (max ${fmtNum(peak)})  ` : "  ");
      legend.appendChild(item);
    }
    if (quiet) {
      const more = document.createElement("span");
      more.className = "muted";
      more.textContent = `${quiet} more series at 0 throughout`;
      legend.appendChild(more);
    }
  }
}

function showCollectors(cs) {
  $("o-cluster").hidden = !cs || cs.length === 0;
  const tb = $("o-collectors").tBodies[0];
  clear(tb);
  for (const c of cs || []) {
    const tr = document.createElement("tr");
    tr.dataset.collector = c.name;
    cell(tr, c.name);
    cell(tr, c.http || "none");
    cell(tr, c.ready ? "ready" : "not ready", c.ready ? "ready" : "notready");
    cell(tr, c.error || `${c.status} ${c.answer || ""} (${c.ms} ms)`);
    tb.appendChild(tr);
  }
}

// --- peers -----------------------------------------------------------------------------------

async function refreshPeers() {
  let v;
  try {
    v = await api("/console/peers");
    showError("peers-error", null);
  } catch (e) {
    showError("peers-error", e);
    return;
  }
  showCollectors(v.collectors);
  const box = $("peers");
  clear(box);
  for (const p of v.peers) {
    const div = document.createElement("div");
    div.className = "peer";
    div.dataset.peer = p.name;
    const title = document.createElement("h3");
    div.appendChild(title);
    if (!p.configured) {
      title.textContent = `${p.name}: not configured`;
    } else if (!p.reachable) {
      title.textContent = `${p.name} (${p.addr}): unreachable`;
      const why = document.createElement("p");
      why.className = "error";
      why.textContent = p.error;
      div.appendChild(why);
    } else {
      // At a glance: intake, then every loss, shed and reject since it started, the bad ones
      // (above 0) marked; the raw metrics behind a disclosure.
      const bad = (p.health || []).filter((h) => h.bad).length;
      title.textContent = `${p.name} (${p.addr}): ` + (bad ? `${bad} loss counter(s) above 0` : "no loss");
      title.className = bad ? "bad" : "";
      const ht = document.createElement("table");
      ht.className = "health";
      const hb = document.createElement("tbody");
      for (const h of p.health || []) {
        const tr = document.createElement("tr");
        if (h.bad) tr.className = "bad";
        cell(tr, (h.bad ? "✗ " : "") + h.what);
        cell(tr, h.family + (h.label ? ` ${h.label}` : ""));
        cell(tr, String(h.value), "num");
        hb.appendChild(tr);
      }
      ht.appendChild(hb);
      div.appendChild(ht);
      const raw = document.createElement("details");
      const sum = document.createElement("summary");
      sum.textContent = `raw metrics (${p.samples.length}` +
        (p.dropped ? `; ${p.dropped} more not shown)` : ")");
      raw.appendChild(sum);
      const t = document.createElement("table");
      const tb = document.createElement("tbody");
      for (const [name, value] of p.samples) {
        const tr = document.createElement("tr");
        cell(tr, name);
        cell(tr, String(value), "num");
        tb.appendChild(tr);
      }
      t.appendChild(tb);
      raw.appendChild(t);
      div.appendChild(raw);
    }
    box.appendChild(div);
  }
}

// --- start -----------------------------------------------------------------------------------

function every(f, ms) {
  const run = async () => {
    await f();
    setTimeout(run, ms);
  };
  run();
}

document.addEventListener("DOMContentLoaded", () => {
  $("token-save").addEventListener("click", () => {
    sessionStorage.setItem("dta-token", $("token").value.trim());
    $("token").value = "";
    $("token-box").hidden = true;
    refreshStores();
    refreshPeers();
    refreshHistory();
  });
  $("q-kind").addEventListener("change", showKind);
  $("q-run").addEventListener("click", runQuery);
  $("t-start").addEventListener("click", startTail);
  $("t-stop").addEventListener("click", () => stopTail());
  $("i-run").addEventListener("click", runPath);
  $("h-run").addEventListener("click", runHistogram);
  $("n-run").addEventListener("click", refreshNetwork);
  for (const id of ["n-window", "n-rank", "n-top"]) $(id).addEventListener("change", refreshNetwork);
  showKind();
  every(refreshStores, STORES_EVERY);
  every(refreshPeers, PEERS_EVERY);
  every(refreshNetwork, NETWORK_EVERY);
  every(refreshHistory, HISTORY_EVERY);
  $("o-range").addEventListener("change", () => drawOverview());
});
