// Drives Debian's headless Firefox ESR (/usr/bin/firefox-esr) through the
// dashboard of a seeded node, over WebDriver BiDi with puppeteer-core (no
// browser download, no geckodriver). test/t/071_dashboard_firefox.pl starts
// it and checks what this reports against SQL. Signs in with a read-only
// token, reads the overview, the queue orders, the consumer groups, the
// streams and the message browser, saves screenshots,
// and records every request the page made, its console errors and any CSP
// violation. Writes $QS_OUT/report.json; exits non-zero if Firefox cannot
// start or a view does not render.
'use strict';

const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');

const env = (k) => {
  if (!process.env[k]) throw new Error(`${k} is not set`);
  return process.env[k];
};
const BASE = env('QS_URL');
const OUT = env('QS_OUT');
const TIMEOUT = 20000;
const report = { views: {}, requests: [], consoleErrors: [], cspViolations: [], screenshots: [] };
let browser;

function finish(code, failure) {
  if (failure) report.failure = failure;
  fs.writeFileSync(path.join(OUT, 'report.json'), JSON.stringify(report, null, 2));
  process.exit(code);
}
// The whole run is bounded: a hung browser is a failure, not a stuck test.
setTimeout(() => {
  console.error('dashboard Firefox run: timed out');
  if (browser && browser.process()) browser.process().kill('SIGKILL');
  finish(1, 'timed out after 90 s');
}, 90000).unref();

async function main() {
  fs.mkdirSync(path.join(OUT, 'screenshots'), { recursive: true });
  browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: process.env.QS_FIREFOX || '/usr/bin/firefox-esr',
    headless: true,
    timeout: TIMEOUT,
    protocolTimeout: TIMEOUT,
    userDataDir: fs.mkdtempSync(path.join(OUT, 'firefox-profile-')),
    defaultViewport: { width: 1366, height: 900 },
    extraPrefsFirefox: {
      // no traffic of the browser's own: updates, telemetry, safe browsing, portal checks
      'app.update.enabled': false,
      'browser.safebrowsing.malware.enabled': false,
      'browser.safebrowsing.phishing.enabled': false,
      'datareporting.policy.dataSubmissionEnabled': false,
      'network.captive-portal-service.enabled': false,
      'network.connectivity-service.enabled': false,
      'toolkit.telemetry.enabled': false,
    },
  });
  report.browser = await browser.version();
  const page = await browser.newPage();
  page.setDefaultTimeout(TIMEOUT);
  page.on('request', (r) => report.requests.push(r.url()));
  page.on('console', (m) => { if (m.type() === 'error') report.consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => report.consoleErrors.push('pageerror: ' + (e && e.message || e)));
  // Firefox reports CSP violations to its own console, not always as a page
  // console message: catch the DOM event too.
  await page.evaluateOnNewDocument(() => {
    window.__qsCsp = [];
    document.addEventListener('securitypolicyviolation', (e) =>
      window.__qsCsp.push(`${e.violatedDirective} blocked ${e.blockedURI}`));
  });

  let seen = 0;
  async function ready(view) {
    await page.waitForFunction((v, n) => document.body.dataset.state === 'ready' &&
      document.body.dataset.view === v && Number(document.body.dataset.render) > n, { timeout: TIMEOUT }, view, seen);
    seen = Number(await page.evaluate(() => document.body.dataset.render));
    const error = await page.evaluate(() => { const e = document.querySelector('#view [data-k=error]'); return e && e.textContent; });
    if (error) throw new Error(`the ${view} view failed: ${error}`);
  }
  async function shot(name) {
    const file = path.join(OUT, 'screenshots', name + '.png');
    await page.screenshot({ path: file, fullPage: true });
    report.screenshots.push(file);
  }
  // every [data-k] of the view (not inside a table row), as text
  const tiles = () => page.evaluate(() => {
    const o = {};
    for (const el of document.querySelectorAll('#view [data-k]')) if (!el.closest('tr')) o[el.dataset.k] = el.textContent;
    return o;
  });
  // table rows keyed by their data attributes, with the [data-k] cells
  const rows = (sel) => page.evaluate((s) => [...document.querySelectorAll(s)].map((tr) => {
    const o = { ...tr.dataset };
    for (const td of tr.querySelectorAll('[data-k]')) o[td.dataset.k] = td.textContent;
    return o;
  }), sel);

  // ---- the page is public; its first data call answers 401: sign in
  await page.goto(BASE + '/', { waitUntil: 'load' });
  await page.waitForSelector('#login:not([hidden])', { visible: true });
  report.loginShown = true;
  await page.locator('#token').fill(env('QS_TOKEN_READ'));
  await page.click('#login-form button[type=submit]');
  await ready('overview');
  // no refresh under our feet while the numbers are read
  await page.$eval('#autorefresh', (el) => { if (el.checked) el.click(); });

  // ---- the overview
  report.views.overview = { tiles: await tiles(), queues: await rows('tr[data-queue]') };
  await shot('overview');

  // ---- a queue, reached by its link
  await page.click('a[href="#/queues/orders"]');
  await ready('queue');
  report.views.queue = { tiles: await tiles(), partitions: await rows('tr[data-partition]:not([data-group])'),
    groups: await rows('tr[data-group]') };
  await shot('queue');

  report.views.queue.backlogGroups = await rows('tr[data-backlog-group]');

  // ---- the consumer groups: backlog and lag of each (group, queue)
  await page.click('nav a[data-nav=groups]');
  await ready('groups');
  report.views.groups = { groups: await rows('tr[data-group]') };

  // ---- the streams: the declared stream's numbers
  await page.click('nav a[data-nav=streams]');
  await ready('streams');
  report.views.streams = await page.evaluate(() => [...document.querySelectorAll('section[data-stream]')].map((s) => {
    const o = { name: s.dataset.stream };
    for (const el of s.querySelectorAll('h3 [data-k], .tile [data-k]')) o[el.dataset.k] = el.textContent;
    return o;
  }));

  // ---- the message browser: one partition, then a message with its trace
  await page.click('nav a[data-nav=messages]');
  await ready('messages');
  await page.select('#msg-queue', 'orders');
  await page.locator('#msg-partition').fill('us');
  await page.click('#msg-filters button[type=submit]');
  await ready('messages');
  report.views.messagesUs = await rows('tr[data-transaction]');
  await shot('messages');
  await page.click('tr[data-transaction="us-12"] a');
  await ready('message');
  report.views.message = { tiles: await tiles(), traces: await rows('tr[data-trace]') };
  await shot('message');

  report.cspViolations = await page.evaluate(() => window.__qsCsp || ['the CSP listener was not installed']);
  report.userAgent = await page.evaluate(() => navigator.userAgent);
  await browser.close();
  browser = null;
}

main().then(() => {
  console.log(`dashboard Firefox run (${report.browser}): ${report.requests.length} requests, ` +
    `${report.screenshots.length} screenshots`);
  finish(0);
}, async (e) => {
  console.error('dashboard Firefox run failed:', e && e.stack || e);
  if (browser) await Promise.race([browser.close().catch(() => {}), new Promise((r) => setTimeout(r, 5000))]);
  finish(1, String(e && e.stack || e));
});
