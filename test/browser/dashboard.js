// Drives Debian's headless Chromium through the dashboard of a seeded node
// (test/t/070_dashboard_browser.pl starts it and checks what this reports
// against SQL). Reads every view, signs in, acts (requeue, delete, seek,
// maintenance), saves a screenshot per view and records every request the
// page made. Writes $QS_OUT/report.json; exits non-zero if Chromium cannot
// start or a view does not render.
'use strict';

const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');

const env = (k) => {
  if (!process.env[k]) throw new Error(`${k} is not set`);
  return process.env[k];
};
const BASE = env('QS_URL');
const OUT = env('QS_OUT');
const report = { views: {}, actions: {}, requests: [], consoleErrors: [], screenshots: [] };

async function main() {
  fs.mkdirSync(path.join(OUT, 'screenshots'), { recursive: true });
  const profile = fs.mkdtempSync(path.join(OUT, 'chromium-profile-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.QS_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1366, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-default-apps', '--disable-extensions', '--metrics-recording-only', '--no-default-browser-check'],
  });
  context.on('request', (r) => report.requests.push(r.url()));
  const page = context.pages()[0] || await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') report.consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => report.consoleErrors.push('pageerror: ' + e.message));
  page.setDefaultTimeout(20000);

  let seen = 0;
  async function ready(view) {
    await page.waitForFunction(([v, n]) => document.body.dataset.state === 'ready' &&
      document.body.dataset.view === v && Number(document.body.dataset.render) > n, [view, seen]);
    seen = Number(await page.evaluate(() => document.body.dataset.render));
  }
  async function shot(name) {
    const file = path.join(OUT, 'screenshots', name + '.png');
    await page.screenshot({ path: file, fullPage: true });
    report.screenshots.push(file);
  }
  // every [data-k] under `scope` (not inside a table row), as text
  const tiles = (scope) => page.evaluate((s) => {
    const o = {};
    for (const el of document.querySelectorAll(s + ' [data-k]')) if (!el.closest('tr')) o[el.dataset.k] = el.textContent;
    return o;
  }, scope || '#view');
  // table rows keyed by their data attributes, with the [data-k] cells
  const rows = (sel) => page.evaluate((s) => [...document.querySelectorAll(s)].map((tr) => {
    const o = { ...tr.dataset };
    for (const td of tr.querySelectorAll('[data-k]')) o[td.dataset.k] = td.textContent;
    return o;
  }), sel);
  const streamSections = () => page.evaluate(() => [...document.querySelectorAll('section[data-stream]')].map((s) => {
    const o = { name: s.dataset.stream, partitions: [] };
    for (const el of s.querySelectorAll('h3 [data-k], .tile [data-k]')) o[el.dataset.k] = el.textContent;
    for (const tr of s.querySelectorAll('tr[data-partition]')) {
      const p = { partition: tr.dataset.partition };
      for (const td of tr.querySelectorAll('[data-k]')) p[td.dataset.k] = td.textContent;
      o.partitions.push(p);
    }
    return o;
  }));
  async function signIn(token, tenant) {
    if (await page.isHidden('#login')) await page.click('#show-login');
    await page.fill('#token', token);
    await page.fill('#tenant', tenant || '');
    await page.click('#login-form button[type=submit]');
  }
  async function go(hash, view) {
    await page.evaluate((h) => { location.hash = h; }, hash);
    await ready(view);
  }
  const flash = () => page.textContent('#flash');

  // ---- the page is public; its data calls ask for a token
  await page.goto(BASE + '/');
  if (process.env.QS_TOKEN_READ) {
    await page.waitForSelector('#login:not([hidden])');
    report.loginShown = true;
    report.loginReason = await page.textContent('#login-reason');
    await shot('login');
    await signIn(env('QS_TOKEN_READ'));
  }
  await ready('overview');
  await page.uncheck('#autorefresh');

  // ---- keyboard: Tab from the top walks real links and buttons, focus visible
  await page.evaluate(() => { document.activeElement.blur(); window.scrollTo(0, 0); });
  await page.focus('a.brand');
  report.tabStops = [];
  for (let i = 0; i < 9; i++) {
    await page.keyboard.press('Tab');
    report.tabStops.push(await page.evaluate(() => {
      const el = document.activeElement;
      return { tag: el.tagName, text: el.textContent.trim(), outline: getComputedStyle(el).outlineStyle };
    }));
  }

  // ---- read every view (read-only token)
  report.views.overview = { tiles: await tiles(), queues: await rows('tr[data-queue]') };
  await shot('overview');

  await page.click('a[href="#/queues/orders"]');
  await ready('queue');
  report.views.queue = { tiles: await tiles(), partitions: await rows('tr[data-partition]:not([data-group])'),
    groups: await rows('tr[data-group]'), backlogGroups: await rows('tr[data-backlog-group]') };
  await shot('queue');

  await page.click('nav a[data-nav=groups]');
  await ready('groups');
  report.views.groups = { groups: await rows('tr[data-group]'), text: await page.textContent('#view') };
  await shot('groups');

  await page.click('a[href="#/groups/billing"]');
  await ready('group');
  report.views.group = { tiles: await tiles(), partitions: await rows('tr[data-partition]') };
  await shot('group');

  await page.click('nav a[data-nav=dlq]');
  await ready('dlq');
  report.views.dlq = { tiles: await tiles(), messages: await rows('tr[data-transaction]') };
  await shot('dlq');

  await page.click('nav a[data-nav=streams]');
  await ready('streams');
  report.views.streams = { declared: await streamSections(), queries: await page.evaluate(() => [...document.querySelectorAll('section[data-query]')].map((s) => {
    const o = { name: s.dataset.query, partitions: [] };
    for (const el of s.querySelectorAll('.tile [data-k]')) o[el.dataset.k] = el.textContent;
    for (const tr of s.querySelectorAll('tr[data-partition]')) {
      const p = { partition: tr.dataset.partition };
      for (const td of tr.querySelectorAll('[data-k]')) p[td.dataset.k] = td.textContent;
      o.partitions.push(p);
    }
    return o;
  })) };
  await shot('streams');

  // ---- the message browser: filter by queue and partition, then by time; one message with its trace
  await page.click('nav a[data-nav=messages]');
  await ready('messages');
  report.views.messagesAll = await rows('tr[data-transaction]');
  await page.selectOption('#msg-queue', 'orders');
  await page.fill('#msg-partition', 'us');
  await page.click('#msg-filters button[type=submit]');
  await ready('messages');
  report.views.messagesUs = await rows('tr[data-transaction]');
  const local = await page.evaluate((iso) => {
    const t = Date.parse(iso);
    return new Date(t - new Date(t).getTimezoneOffset() * 60000).toISOString().slice(0, 19);
  }, env('QS_MSG_FROM'));
  await page.fill('#msg-from', local);
  await page.click('#msg-filters button[type=submit]');
  await ready('messages');
  report.views.messagesFrom = { hash: await page.evaluate(() => location.hash), rows: await rows('tr[data-transaction]') };
  await shot('messages');
  await page.click('tr[data-transaction="us-12"] a');
  await ready('message');
  report.views.message = { tiles: await tiles(), traces: await rows('tr[data-trace]') };
  await shot('message');

  // ---- read-only may not act
  if (process.env.QS_TOKEN_READ) {
    await page.click('nav a[data-nav=maintenance]');
    await ready('maintenance');
    report.actions.maintenanceReadOnly = await page.textContent('#view');
    await go('#/dlq', 'dlq');
    await page.click(`#requeue-${env('QS_REQUEUE_TXN')}`);
    await ready('dlq');
    report.actions.requeueReadOnly = await flash();
    await go('#/streams', 'streams');
    page.once('dialog', (d) => d.accept());
    await page.click(`[id="pause-${env('QS_STREAM')}"]`);
    await ready('streams');
    report.actions.pauseReadOnly = await flash();
    await signIn(env('QS_TOKEN_ADMIN'));
    await ready('streams');
    await go('#/', 'overview');
  }

  // ---- admin acts: requeue one dead letter, delete another (confirmed)
  await go('#/dlq', 'dlq');
  await page.click(`#requeue-${env('QS_REQUEUE_TXN')}`);
  await ready('dlq');
  report.actions.requeue = { flash: await flash(), tiles: await tiles(), messages: await rows('tr[data-transaction]') };
  page.once('dialog', (d) => { report.actions.deleteQuestion = d.message(); d.accept(); });
  await page.click(`#delete-${env('QS_DELETE_TXN')}`);
  await ready('dlq');
  report.actions.delete = { flash: await flash(), tiles: await tiles(), messages: await rows('tr[data-transaction]') };

  // ---- requeue a dead letter from the message browser
  await go(`#/messages/${env('QS_EU')}/${env('QS_REQUEUE_MSG')}`, 'message');
  report.actions.messageBefore = await tiles();
  await page.click('#requeue-message');
  await ready('message');
  report.actions.requeueMessage = { flash: await flash(), tiles: await tiles() };

  // ---- pause the declared stream (confirmed); 070 checks SQL, then the phone run resumes it
  await go('#/streams', 'streams');
  page.once('dialog', (d) => { report.actions.pauseQuestion = d.message(); d.accept(); });
  await page.click(`[id="pause-${env('QS_STREAM')}"]`);
  await ready('streams');
  report.actions.pause = { flash: await flash(), declared: await streamSections() };

  // ---- seek a group to the end (confirmed)
  await go('#/groups/billing', 'group');
  page.once('dialog', (d) => { report.actions.seekQuestion = d.message(); d.accept(); });
  await page.click('button[data-action=seek-end]');
  await ready('group');
  report.actions.seek = { flash: await flash(), tiles: await tiles(), partitions: await rows('tr[data-partition]') };

  // ---- maintenance: pop maintenance on (confirmed), then off again
  await go('#/maintenance', 'maintenance');
  report.actions.maintenanceBefore = await tiles();
  page.once('dialog', (d) => d.accept());
  await page.click('#toggle-pop');
  await ready('maintenance');
  report.actions.maintenanceOn = await tiles();
  await shot('maintenance');
  await page.click('#toggle-pop');
  await ready('maintenance');
  report.actions.maintenanceOff = await tiles();

  // ---- the overview after the actions, with a chart of the samples
  await go('#/', 'overview');
  report.views.overviewAfter = { tiles: await tiles(), queues: await rows('tr[data-queue]') };

  // ---- another tenant sees only its own
  if (process.env.QS_TENANT_B) {
    await signIn(env('QS_TOKEN_ADMIN'), env('QS_TENANT_B'));
    await ready('overview');
    report.views.tenantB = { tiles: await tiles(), queues: await rows('tr[data-queue]') };
    await go('#/dlq', 'dlq');
    report.views.tenantBDlq = { tiles: await tiles() };
    await go('#/streams', 'streams');
    report.views.tenantBStreams = await page.textContent('#view');
  }
  await context.close();
}

// ---- with auth = off, on a phone-width screen (390 px): no sign-in box, no
// view wider than the screen; resumes the stream the first run paused
async function phone() {
  fs.mkdirSync(path.join(OUT, 'screenshots'), { recursive: true });
  const profile = fs.mkdtempSync(path.join(OUT, 'chromium-phone-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.QS_CHROMIUM || '/usr/bin/chromium', headless: true,
    viewport: { width: 390, height: 844 }, deviceScaleFactor: 1, isMobile: false,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-default-apps', '--disable-extensions', '--no-default-browser-check'],
  });
  context.on('request', (r) => report.requests.push(r.url()));
  const page = context.pages()[0] || await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') report.consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => report.consoleErrors.push('pageerror: ' + e.message));
  page.setDefaultTimeout(20000);
  let seen = 0;
  async function ready(view) {
    await page.waitForFunction(([v, n]) => document.body.dataset.state === 'ready' &&
      document.body.dataset.view === v && Number(document.body.dataset.render) > n, [view, seen]);
    seen = Number(await page.evaluate(() => document.body.dataset.render));
  }
  await page.goto(BASE + '/');
  await ready('overview');
  await page.uncheck('#autorefresh');
  report.phone = { width: await page.evaluate(() => window.innerWidth),
    signInButtonVisible: await page.isVisible('#show-login'), loginVisible: await page.isVisible('#login'),
    overviewBacklog: await page.textContent('[data-k=backlog]'), overflow: {} };
  const views = [['#/', 'overview'], ['#/queues/orders', 'queue'], ['#/groups', 'groups'], ['#/groups/billing', 'group'],
    ['#/messages', 'messages'], [`#/messages/${env('QS_EU')}/eu-4`, 'message'], ['#/dlq', 'dlq'],
    ['#/streams', 'streams'], ['#/maintenance', 'maintenance']];
  for (const [hash, view] of views) {
    await page.evaluate((h) => { location.hash = h; }, hash);
    await ready(view);
    // how far the page reaches past the screen's right edge (0: nothing does)
    report.phone.overflow[view] = await page.evaluate(() =>
      Math.max(document.documentElement.scrollWidth, document.body.scrollWidth) - document.documentElement.clientWidth);
    const file = path.join(OUT, 'screenshots', 'phone-' + view + '.png');
    await page.screenshot({ path: file, fullPage: true });
  }
  await page.evaluate(() => { location.hash = '#/streams'; });
  await ready('streams');
  await page.click(`[id="resume-${env('QS_STREAM')}"]`);
  await ready('streams');
  report.phone.resumeFlash = await page.textContent('#flash');
  report.phone.afterResume = await page.textContent(`section[data-stream="${env('QS_STREAM')}"] [data-k=paused]`);
  await context.close();
}

(process.env.QS_PHASE === 'phone' ? phone() : main()).then(() => {
  fs.writeFileSync(path.join(OUT, 'report.json'), JSON.stringify(report, null, 2));
  console.log(`dashboard browser run: ${report.requests.length} requests, ${report.screenshots.length} screenshots`);
}, (e) => {
  fs.writeFileSync(path.join(OUT, 'report.json'), JSON.stringify({ ...report, failure: String(e && e.stack || e) }, null, 2));
  console.error('dashboard browser run failed:', e && e.stack || e);
  process.exit(1);
});
