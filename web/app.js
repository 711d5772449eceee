/* The drths monitor page: frames from drths-monitor's /events stream (one JSON object per site
 * frame, see platform/telemetry.h) into uPlot strip charts, the sites' state, the run's statistics
 * and the Start / Stop / Abort buttons (POST /control/...); whether each site acknowledged the
 * last command comes from GET /sites, polled twice a second. */
"use strict";

(function () {
  const WINDOW_S = 20;          // strip charts show the last 20 s of run time
  const LOOP_S = 10;            // the force-displacement loop shows the last 10 s
  const STALE_MS = 1500;        // a site with no frame for this long is shown disconnected
  const SITES = ["numerical", "physical"];
  const token = new URLSearchParams(location.search).get("token");
  const q = token ? "?token=" + encodeURIComponent(token) : "";

  // Rows keyed by tick: both sites sample the same ticks (every rate/50), so one row holds both.
  let rows = new Map();
  let ticks = [];              // sorted keys of rows
  const site = {};
  for (const s of SITES)
    site[s] = { last: null, lastAt: 0, frames: 0, prev: null, maxTick: -1, maxLate: 0,
                maxRtt: 0, peakDisp: 0, peakForce: 0 };
  let dirty = false;
  let streamUp = false;
  let monitorSites = null;     // the last GET /sites answer (control acknowledgements)

  function num(v) { return typeof v === "number" && isFinite(v) ? v : null; }

  function resetRun() {
    rows = new Map();
    ticks = [];
    for (const s of SITES) {
      Object.assign(site[s], { prev: null, maxTick: -1, maxLate: 0, maxRtt: 0, peakDisp: 0,
                               peakForce: 0 });
    }
  }

  function rowFor(f) {
    let r = rows.get(f.tick);
    if (!r) {
      r = { t: f.t };
      rows.set(f.tick, r);
      if (!ticks.length || f.tick > ticks[ticks.length - 1]) ticks.push(f.tick);
      else { // rare: the other site's frame of an earlier tick arrives later
        let i = ticks.length;
        while (i > 0 && ticks[i - 1] > f.tick) i--;
        ticks.splice(i, 0, f.tick);
      }
    }
    return r;
  }

  function onFrame(f) {
    const s = site[f.site];
    if (!s) return;
    s.frames++;
    s.lastAt = performance.now();
    if (f.tick >= 0 && f.tick + 2000 < s.maxTick && (f.state === "RUN" || f.state === "READY"))
      resetRun(); // a new run began
    if (f.tick >= 0 && num(f.t) !== null && f.tick > s.maxTick) {
      const r = rowFor(f);
      const p = f.site === "physical" ? "p_" : "n_";
      r[p + "cmd"] = num(f.cmd);
      r[p + "meas"] = num(f.meas);
      r[p + "fmeas"] = num(f.fmeas);
      r[p + "fused"] = num(f.fused);
      r[p + "smith"] = num(f.smith);
      r[p + "rtt"] = num(f.rtt);
      r[p + "L"] = num(f.L);
      r[p + "lateness"] = num(f.lateness);
      if (s.prev && f.t > s.prev.t) {
        const dt = f.t - s.prev.t;
        r[p + "late_rate"] = (f.late - s.prev.late) / dt;
        r[p + "conc_rate"] = (f.concealed - s.prev.concealed) / dt;
      }
      s.prev = { t: f.t, late: f.late, concealed: f.concealed };
      s.maxTick = f.tick;
      if (num(f.lateness) !== null) s.maxLate = Math.max(s.maxLate, f.lateness);
      if (num(f.rtt) !== null) s.maxRtt = Math.max(s.maxRtt, f.rtt);
      const d = num(f.meas) ?? num(f.cmd);
      if (d !== null) s.peakDisp = Math.max(s.peakDisp, Math.abs(d));
      if (num(f.fmeas) !== null) s.peakForce = Math.max(s.peakForce, Math.abs(f.fmeas));
      // keep the window (and a little more for the loop)
      const tmin = f.t - WINDOW_S;
      while (ticks.length && rows.get(ticks[0]).t < tmin) rows.delete(ticks.shift());
    }
    s.last = f;
    dirty = true;
  }

  // ---- charts ------------------------------------------------------------------------------
  const charts = {};
  const colors = { cmd: "#1f77b4", ncmd: "#9467bd", meas: "#d62728", fmeas: "#d62728",
                   fused: "#1f77b4", smith: "#2ca02c", rtt: "#1f77b4", L: "#ff7f0e",
                   late: "#ff7f0e", conc: "#d62728", nconc: "#9467bd", lateness: "#8c564b" };

  function size(el) {
    const w = Math.max(280, el.clientWidth - 16);
    return { width: w, height: Math.round(Math.min(260, Math.max(160, w * 0.38))) };
  }

  function strip(id, series, extraScales, axes) {
    const el = document.getElementById(id);
    const opts = Object.assign({
      ...size(el),
      scales: Object.assign({ x: { time: false } }, extraScales || {}),
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
      series: [{ label: "t (s)", value: (u, v) => v == null ? "-" : v.toFixed(2) }].concat(
        series.map(s => Object.assign({ width: 1.5, spanGaps: true }, s))),
      axes: axes || [{ label: "run time (s)" }, {}],
    });
    const u = new uPlot(opts, [[], ...series.map(() => [])], el);
    charts[id] = { u, keys: series.map(s => s.key), el };
    return u;
  }

  strip("ch-disp", [
    { key: "n_cmd", label: "command (numerical)", stroke: colors.ncmd, scale: "mm" },
    { key: "p_cmd", label: "command (actuator site)", stroke: colors.cmd, scale: "mm" },
    { key: "p_meas", label: "measured", stroke: colors.meas, scale: "mm" },
  ], { mm: {} }, [{ label: "run time (s)" }, { scale: "mm" }]);
  strip("ch-force", [
    { key: "p_fmeas", label: "measured", stroke: colors.fmeas, scale: "kN" },
    { key: "n_fused", label: "used by the integrator", stroke: colors.fused, scale: "kN" },
    { key: "n_smith", label: "Smith correction", stroke: colors.smith, scale: "kN" },
  ], { kN: {} }, [{ label: "run time (s)" }, { scale: "kN" }]);
  strip("ch-rtt", [
    { key: "n_rtt", label: "round trip (ms)", stroke: colors.rtt, scale: "ms" },
    { key: "n_L", label: "L (ticks)", stroke: colors.L, scale: "ticks" },
  ], { ms: {}, ticks: {} },
  [{ label: "run time (s)" }, { scale: "ms", label: "ms" },
   { scale: "ticks", side: 1, label: "ticks", grid: { show: false } }]);
  strip("ch-rates", [
    { key: "p_late_rate", label: "late commands /s", stroke: colors.late, scale: "r" },
    { key: "p_conc_rate", label: "concealed commands /s", stroke: colors.conc, scale: "r" },
    { key: "n_conc_rate", label: "concealed feedback /s", stroke: colors.nconc, scale: "r" },
    { key: "n_late_rate", label: "late feedback /s", stroke: "#17becf", scale: "r" },
  ], { r: { range: (u, lo, hi) => [0, Math.max(1, hi)] } }, [{ label: "run time (s)" }, { scale: "r" }]);
  strip("ch-late", [
    { key: "p_lateness", label: "wake-up lateness (us)", stroke: colors.lateness, scale: "us" },
  ], { us: { range: (u, lo, hi) => [0, Math.max(50, hi)] } }, [{ label: "run time (s)" }, { scale: "us" }]);

  // The loop: uPlot's x-y mode (mode 2), measured displacement against measured force.
  (function () {
    const el = document.getElementById("ch-loop");
    const u = new uPlot({
      ...size(el),
      mode: 2,
      scales: { x: { time: false }, y: {} },
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      axes: [{ label: "measured displacement (mm)" }, { label: "measured force (kN)" }],
      series: [{}, { label: "loop", stroke: colors.meas, width: 1.2,
                     points: { show: false }, facets: [{ scale: "x", auto: true }, { scale: "y", auto: true }] }],
    }, [null, [[], []]], el);
    charts["ch-loop"] = { u, el, loop: true };
  })();

  function scaleOf(key, v) {
    if (v == null) return null;
    if (key.endsWith("cmd") || key.endsWith("meas") && !key.endsWith("fmeas")) return v * 1e3;
    if (key.endsWith("fmeas") || key.endsWith("fused") || key.endsWith("smith")) return v * 1e-3;
    return v;
  }

  function redraw() {
    if (!dirty) return;
    dirty = false;
    const xs = ticks.map(k => rows.get(k).t);
    for (const id in charts) {
      const c = charts[id];
      if (c.loop) {
        const tmin = xs.length ? xs[xs.length - 1] - LOOP_S : 0;
        const dx = [], fy = [];
        for (const k of ticks) {
          const r = rows.get(k);
          if (r.t >= tmin && r.p_meas != null && r.p_fmeas != null) {
            dx.push(r.p_meas * 1e3);
            fy.push(r.p_fmeas * 1e-3);
          }
        }
        c.u.setData([null, [dx, fy]]);
        c.points = dx.length;
        continue;
      }
      const data = [xs];
      for (const key of c.keys)
        data.push(ticks.map(k => scaleOf(key, rows.get(k)[key] ?? null)));
      c.u.setData(data);
      c.points = xs.length;
    }
  }

  window.addEventListener("resize", () => {
    for (const id in charts) charts[id].u.setSize(size(charts[id].el));
  });

  // ---- sites, statistics, buttons ----------------------------------------------------------
  function fmt(v, d, unit) { return v == null ? "-" : v.toFixed(d) + (unit ? " " + unit : ""); }

  function kv(el, pairs) {
    el.replaceChildren(...pairs.flatMap(([k, v]) => {
      const a = document.createElement("span"); a.textContent = k;
      const b = document.createElement("span"); b.textContent = v;
      if (k === "tick") b.className = "tick";
      return [a, b];
    }));
  }

  function clock(iso) {
    const d = new Date(iso);
    return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
  }

  // "abort: acknowledged by physical at 19:40:01.123", "... sent, not acknowledged yet (3 tries)"
  function controlText(name, c) {
    if (!c) return "control: none sent";
    const sent = c.command + " sent at " + clock(c.sent_at);
    if (c.status === "acknowledged") return c.command + ": acknowledged by " + name + " at " + clock(c.acked_at);
    if (c.status === "sent") return sent + ", not acknowledged yet (" + c.tries + " tries)";
    return sent + ": NOT acknowledged by " + name + " after " + c.tries + " tries";
  }

  function updateControl() {
    for (const name of SITES) {
      const el = document.getElementById("site-" + name).querySelector(".ctl");
      const m = monitorSites?.sites?.find(x => x.site === name);
      const c = m ? m.control : null;
      el.textContent = controlText(name, c);
      el.className = "ctl " + (c ? c.status : "");
    }
  }

  async function pollSites() {
    try {
      const headers = token ? { "X-Drths-Token": token } : {};
      const r = await fetch("sites" + q, { headers, cache: "no-store" });
      if (r.ok) monitorSites = await r.json();
    } catch (e) { /* the stream badge already says the monitor is unreachable */ }
    updateControl();
  }

  function stale(s) { return !s.last || performance.now() - s.lastAt > STALE_MS; }

  function updatePanels() {
    for (const name of SITES) {
      const s = site[name], el = document.getElementById("site-" + name);
      const badge = el.querySelector(".state");
      const f = s.last;
      let state = f ? f.state : "no data";
      if (f && stale(s) && f.state !== "DONE") state = "disconnected";
      badge.textContent = state;
      badge.className = "state badge " + (state === "no data" ? "off" : state);
      el.classList.toggle("stale", stale(s));
      el.querySelector(".event").textContent = f ? f.event : "-";
      if (!f) continue;
      const pairs = [["tick", String(f.tick)], ["run time", fmt(num(f.t), 2, "s")],
                     ["late", String(f.late)], ["concealed", String(f.concealed)],
                     ["rejected", String(f.rejected)], ["L", fmt(num(f.L), 0, "ticks")]];
      if (name === "numerical") pairs.push(["round trip", fmt(num(f.rtt), 3, "ms")]);
      else pairs.push(["tick lateness", fmt(num(f.lateness), 1, "us")]);
      pairs.push(["frames", String(s.frames)],
                 ["last frame", stale(s) ? ((performance.now() - s.lastAt) / 1e3).toFixed(1) + " s ago" : "now"]);
      kv(el.querySelector(".kv"), pairs);
    }
    const n = site.numerical, p = site.physical;
    kv(document.getElementById("stats-kv"), [
      ["run time", fmt(Math.max(num(p.last?.t) ?? -1, num(n.last?.t) ?? -1) >= 0
                       ? Math.max(num(p.last?.t) ?? -1, num(n.last?.t) ?? -1) : null, 2, "s")],
      ["commands late / concealed", p.last ? p.last.late + " / " + p.last.concealed : "-"],
      ["feedback late / concealed", n.last ? n.last.late + " / " + n.last.concealed : "-"],
      ["rejected datagrams", String((n.last?.rejected || 0) + (p.last?.rejected || 0))],
      ["max tick lateness", p.maxTick >= 0 ? fmt(p.maxLate, 1, "us") : "-"],
      ["max round trip", n.maxTick >= 0 ? fmt(n.maxRtt, 3, "ms") : "-"],
      ["peak displacement", p.maxTick >= 0 ? fmt(p.peakDisp * 1e3, 2, "mm") : "-"],
      ["peak force", p.maxTick >= 0 ? fmt(p.peakForce * 1e-3, 1, "kN") : "-"],
      ["telemetry lost at the sites", String((n.last?.tlm_errors || 0) + (p.last?.tlm_errors || 0))],
      ["control refused at the sites", String((n.last?.ctl_refused || 0) + (p.last?.ctl_refused || 0))],
      ["telemetry refused by the monitor", monitorSites
        ? String(Object.values(monitorSites.rejected || {}).reduce((a, b) => a + b, 0)) : "-"],
    ]);
    const live = SITES.filter(x => !stale(site[x]));
    const ready = SITES.every(x => !stale(site[x]) && site[x].last.state === "READY");
    const running = live.some(x => ["RUN", "HOLD", "WAITING", "READY"].includes(site[x].last.state));
    document.getElementById("btn-start").disabled = !streamUp || !ready;
    document.getElementById("btn-stop").disabled = !streamUp || !running;
    document.getElementById("btn-abort").disabled = !streamUp || !running;
    const link = document.getElementById("link");
    link.textContent = streamUp ? "stream: live" : "stream: lost (retrying)";
    link.className = "badge " + (streamUp ? "on" : "off");
  }

  async function control(what) {
    if (what === "abort" && !confirm("Abort: HOLD now at both sites. The run ends. Continue?"))
      return;
    const out = document.getElementById("control-result");
    out.textContent = what + ": sending...";
    try {
      const headers = { "X-Drths-Control": "1" };
      if (token) headers["X-Drths-Token"] = token;
      const r = await fetch("control/" + what + q, { method: "POST", headers });
      const j = await r.json().catch(() => ({}));
      out.textContent = r.ok ? what + " sent to " + (j.sent_to || []).join(", ")
                             : what + " failed: " + (j.error || r.status);
      pollSites();
    } catch (e) {
      out.textContent = what + " failed: " + e;
    }
  }
  for (const w of ["start", "stop", "abort"])
    document.getElementById("btn-" + w).addEventListener("click", () => control(w));

  // ---- stream ------------------------------------------------------------------------------
  const es = new EventSource("events" + q);
  es.onopen = () => { streamUp = true; };
  es.onerror = () => { streamUp = false; };
  es.onmessage = (ev) => {
    try { onFrame(JSON.parse(ev.data)); } catch (e) { /* a malformed frame is skipped */ }
  };

  setInterval(redraw, 100);
  setInterval(updatePanels, 250);
  setInterval(pollSites, 500);

  // For the browser test and for curious operators in the console.
  window.drthsMonitor = {
    site, charts, controlText: (name) => {
      const m = monitorSites?.sites?.find(x => x.site === name);
      return controlText(name, m ? m.control : null);
    },
    points: () => Object.fromEntries(Object.entries(charts).map(([k, c]) => [k, c.points || 0])),
  };
})();
