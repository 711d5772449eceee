// The monitor page held open in headless Chromium for the length of a run, as an operator's
// browser would be: it loads the page, prints "page open" once the page script runs, then only
// keeps the page open (streaming and drawing) until the file STOPFILE exists (bounded by
// MAX_S seconds, 150 by default). Then it saves a screenshot and prints one JSON line: the frames
// the page received from each site, the chart points and any error in the page.
// Usage: node monitor_watch.js URL STOPFILE SCREENSHOT.png [MAX_S]
// Exit 0 when the page opened and ran without an error; the caller checks the figures.
"use strict";
const fs = require("fs");
const puppeteer = require("puppeteer-core");

const [url, stopFile, shot, maxArg] = process.argv.slice(2);
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const maxMs = 1000 * Number(maxArg || 150);

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
  try {
    await page.setViewport({ width: 1366, height: 900 });
    await page.goto(url, { waitUntil: "load", timeout: 30000 });
    await page.waitForFunction(() => !!window.drthsMonitor, { timeout: 10000, polling: 100 });
    console.log("page open");
    const end = Date.now() + maxMs;
    while (!fs.existsSync(stopFile) && Date.now() < end)
      await new Promise(r => setTimeout(r, 100));
    seen.stopped_by = fs.existsSync(stopFile) ? "stop file" : "time limit";
    seen.frames = await page.evaluate(() => ({
      numerical: window.drthsMonitor.site.numerical.frames,
      physical: window.drthsMonitor.site.physical.frames }));
    seen.states = await page.evaluate(() => ({
      numerical: window.drthsMonitor.site.numerical.last?.state ?? null,
      physical: window.drthsMonitor.site.physical.last?.state ?? null }));
    seen.points = await page.evaluate(() => window.drthsMonitor.points());
    await page.screenshot({ path: shot, fullPage: true });
    seen.screenshot = shot;
    if (errors.length) throw new Error("errors in the page: " + errors.join(" | "));
    ok = true;
  } catch (e) {
    seen.error = String(e.message || e);
    try { await page.screenshot({ path: shot, fullPage: true }); seen.screenshot = shot; } catch (_) {}
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(seen));
  process.exit(ok ? 0 : 1);
})().catch(e => { console.error(e); process.exit(1); });
