// The monitor page in headless Chromium (puppeteer-core from web/node_modules, Debian's
// /usr/bin/chromium). Usage: node monitor_e2e.js URL SCREENSHOT.png
// With both sites started with --wait-start: waits until both are READY, presses Start, waits
// until both sites acknowledge it (the panels say so) and the charts receive data and the
// counters move, presses Stop (acknowledged by the numerical site), waits until both sites
// report DONE, saves a screenshot, and prints one JSON line of what it saw. Exit 0 when every
// check passed; every wait is bounded.
"use strict";
const puppeteer = require("puppeteer-core");

const [url, shot] = process.argv.slice(2);
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

function fail(msg) { throw new Error(msg); }

async function until(page, what, fn, timeoutMs, arg) {
  try {
    await page.waitForFunction(fn, { timeout: timeoutMs, polling: 100 }, arg);
  } catch (e) {
    fail("timed out waiting for " + what);
  }
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // root in a container: no sandbox; no GPU on a test machine
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
  });
  const seen = {};
  let ok = false;
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", e => errors.push(String(e)));
  page.on("console", m => { if (m.type() === "error") errors.push(m.text()); });
  page.on("dialog", d => d.accept()); // the Abort confirm(), should the test press it
  try {
    await page.setViewport({ width: 1366, height: 900 }); // a laptop screen
    await page.goto(url, { waitUntil: "load", timeout: 20000 });
    await until(page, "the page script", () => !!window.drthsMonitor, 10000);

    // Start is enabled only when both sites report READY.
    await until(page, "both sites READY and Start enabled",
      () => !document.getElementById("btn-start").disabled, 30000);
    seen.ready = await page.$$eval(".site .state", els => els.map(e => e.textContent));
    await page.click("#btn-start");
    // Each site acknowledges Start (its frames carry the counter), and the panel says so.
    await until(page, "Start acknowledged by both sites in their panels",
      () => ["numerical", "physical"].every(s => new RegExp("^start: acknowledged by " + s + " at ")
              .test(document.querySelector("#site-" + s + " .ctl").textContent)), 10000);
    seen.start_ack = await page.$$eval(".site .ctl", els => els.map(e => e.textContent));

    // Charts receive data and the counters move.
    await until(page, "both sites RUN with chart data",
      () => {
        const m = window.drthsMonitor, p = m.points();
        return m.site.physical.last?.state === "RUN" && m.site.numerical.last?.state === "RUN" &&
               p["ch-disp"] > 50 && p["ch-loop"] > 20;
      }, 30000);
    const tick0 = await page.$eval("#site-physical .tick", e => Number(e.textContent));
    await until(page, "the actuator site's tick counter to move on by 1 s of ticks",
      t0 => Number(document.querySelector("#site-physical .tick")?.textContent) > t0 + 4000,
      15000, tick0);
    seen.points = await page.evaluate(() => window.drthsMonitor.points());
    seen.tick0 = tick0;
    seen.tick1 = await page.$eval("#site-physical .tick", e => Number(e.textContent));
    seen.frames = await page.evaluate(() => ({
      numerical: window.drthsMonitor.site.numerical.frames,
      physical: window.drthsMonitor.site.physical.frames }));
    for (const [k, v] of Object.entries(seen.points))
      if (!(v > 20)) fail(`chart ${k} has only ${v} points`);
    // The data in the displacement chart is real: the measured displacement is not flat.
    seen.disp_range_mm = await page.evaluate(() => {
      const d = window.drthsMonitor.charts["ch-disp"].u.data[3].filter(v => v != null);
      return Math.max(...d) - Math.min(...d);
    });
    if (!(seen.disp_range_mm > 0)) fail("the measured displacement is flat");

    // Stop: both sites end and report DONE with their reason.
    await page.click("#btn-stop");
    await until(page, "the Stop reply",
      () => /stop sent to/.test(document.getElementById("control-result").textContent), 10000);
    await until(page, "Stop acknowledged by the numerical site",
      () => /^stop: acknowledged by numerical at /.test(
              document.querySelector("#site-numerical .ctl").textContent), 10000);
    await until(page, "both sites DONE",
      () => ["numerical", "physical"].every(s => window.drthsMonitor.site[s].last?.state === "DONE"),
      30000);
    // The panels refresh every 250 ms: then each site's last event is its end line.
    await until(page, "both sites' end lines in the panels",
      () => [...document.querySelectorAll("#site-numerical .event, #site-physical .event")]
              .every(e => /\(exit \d+\)$/.test(e.textContent)), 5000);
    seen.done_events = await page.$$eval(".site .event", els => els.map(e => e.textContent));
    await page.screenshot({ path: shot, fullPage: true });
    seen.screenshot = shot;
    if (errors.length) fail("errors in the page: " + errors.join(" | "));
    ok = true;
  } catch (e) {
    seen.error = String(e.message || e);
    seen.page_errors = errors;
    try { await page.screenshot({ path: shot, fullPage: true }); seen.screenshot = shot; } catch (_) {}
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(seen));
  process.exit(ok ? 0 : 1);
})().catch(e => { console.error(e); process.exit(1); });
