/*
 * queen_streams dashboard: a single page over the listener's own JSON
 * routes. No framework, no build step, nothing loaded from elsewhere (the
 * page's Content-Security-Policy allows only this origin). Every value read
 * from the server is put in the page as text, never as HTML.
 */
'use strict';

(function () {
  const REFRESH_MS = 5000;
  const store = {
    get token() { return sessionStorage.getItem('qs.token') || ''; },
    set token(v) { v ? sessionStorage.setItem('qs.token', v) : sessionStorage.removeItem('qs.token'); },
    get tenant() { return localStorage.getItem('qs.tenant') || ''; },
    set tenant(v) { v ? localStorage.setItem('qs.tenant', v) : localStorage.removeItem('qs.tenant'); },
  };
  const $ = (sel) => document.querySelector(sel);
  let renders = 0;
  let busy = false;

  /* ------------------------------------------------------------ DOM helpers */
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    append(el, kids);
    return el;
  }
  function append(el, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === undefined || k === null || k === false) continue;
      el.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
  }
  function svg(tag, attrs, ...kids) {
    const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    append(el, kids);
    return el;
  }
  const fmt = (n) => (n === null || n === undefined) ? '–' : Number(n).toLocaleString('en-US');
  const rate = (n) => Number(n).toLocaleString('en-US', { maximumFractionDigits: 2, minimumFractionDigits: 2 });
  function ago(ts) {
    if (!ts) return h('span', { class: 'muted' }, 'never');
    const s = Math.max(0, Math.round((Date.now() - Date.parse(ts)) / 1000));
    const txt = s < 90 ? `${s} s ago` : s < 5400 ? `${Math.round(s / 60)} min ago`
      : s < 172800 ? `${Math.round(s / 3600)} h ago` : `${Math.round(s / 86400)} d ago`;
    return h('time', { datetime: ts, title: ts }, txt);
  }
  const num = (key, n, extra) => h('td', { class: 'num' + (extra ? ' ' + extra : ''), 'data-k': key }, fmt(n));
  const tile = (key, label, value) =>
    h('div', { class: 'tile' }, h('div', { class: 'label' }, label), h('div', { class: 'value', 'data-k': key }, value));
  function table(head, rows, empty) {
    if (!rows.length) return h('p', { class: 'muted' }, empty || 'Nothing here.');
    return h('table', {}, h('thead', {}, h('tr', {}, head.map((c) =>
      h('th', { scope: 'col', class: /^#/.test(c) ? 'num' : null }, c.replace(/^#/, ''))))), h('tbody', {}, rows));
  }
  function flash(text, error) {
    const box = $('#flash');
    box.replaceChildren(h('div', { class: 'msg' + (error ? ' error' : '') }, text));
  }
  const enc = encodeURIComponent;

  /* ------------------------------------------------------------ the API */
  class ApiError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }
  async function api(method, path, body) {
    const headers = { accept: 'application/json' };
    if (store.token) headers.authorization = 'Bearer ' + store.token;
    if (store.tenant) headers['x-queen-tenant'] = store.tenant;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit', cache: 'no-store' });
    const text = await r.text();
    let doc = null;
    try { doc = text ? JSON.parse(text) : null; } catch (e) { doc = null; }
    if (r.status === 401) {
      showLogin((doc && doc.error) || 'The listener asks for a bearer token.');
      throw new ApiError(401, 'sign in to see this: ' + ((doc && doc.error) || 'unauthorized'));
    }
    if (r.status === 403) throw new ApiError(403, 'your token\'s role does not allow this (' + method + ' ' + path + ')');
    if (!r.ok) throw new ApiError(r.status, (doc && doc.error) || `${method} ${path}: HTTP ${r.status}`);
    return doc;
  }
  const get = (path) => api('GET', path);

  /* ------------------------------------------------------------ login */
  function showLogin(reason) {
    $('#login-reason').textContent = reason;
    $('#token').value = store.token;
    $('#tenant').value = store.tenant;
    $('#login').hidden = false;
    $('#token').focus();
  }
  function setupLogin() {
    $('#show-login').addEventListener('click', () => showLogin('Token and tenant for the data calls.'));
    $('#login-cancel').addEventListener('click', () => { $('#login').hidden = true; });
    $('#logout').addEventListener('click', () => {
      store.token = ''; store.tenant = ''; $('#token').value = ''; $('#tenant').value = ''; render();
    });
    $('#login-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      store.token = $('#token').value.trim();
      store.tenant = $('#tenant').value.trim();
      $('#login').hidden = true;
      render();
    });
  }

  /* ------------------------------------------------------------ the chart */
  function chart(tp, title) {
    const W = 760, H = 220, L = 48, R = 10, T = 12, B = 28;
    const s = tp.samples || [];
    const secs = s.reduce((a, p) => a + p.seconds, 0);
    const span = secs < 120 ? `${secs} s` : `${Math.round(secs / 60)} min`;
    const keys = ['pushed', 'popped', 'acked'];
    const top = Math.max(1, ...s.flatMap((x) => keys.map((k) => x[k])));
    const step = Math.pow(10, Math.floor(Math.log10(top)));
    const max = [1, 2, 2.5, 5, 10].map((m) => m * step).find((m) => m >= top);
    const n = Math.max(s.length, 2);
    const x = (i) => L + (W - L - R) * (s.length < 2 ? 0.5 : i / (n - 1));
    const y = (v) => T + (H - T - B) * (1 - v / max);
    const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title });
    g.append(svg('title', {}, title));
    for (let k = 0; k <= 4; k++) {
      const v = max * k / 4;
      g.append(svg('line', { class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      g.append(svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, v.toLocaleString('en-US')));
    }
    g.append(svg('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }));
    if (s.length) {
      const lab = (i) => new Date(Date.parse(s[i].at)).toISOString().slice(11, secs < 600 ? 19 : 16) + ' UTC';
      g.append(svg('text', { x: x(0), y: H - 8, 'text-anchor': 'start' }, lab(0)));
      g.append(svg('text', { x: x(s.length - 1), y: H - 8, 'text-anchor': 'end' }, lab(s.length - 1)));
    }
    for (const k of keys) {
      if (!s.length) break;
      const pts = s.map((p, i) => `${x(i).toFixed(1)},${y(p[k]).toFixed(1)}`).join(' ');
      g.append(svg('polyline', { class: k, points: pts }));
    }
    const total = (k) => s.reduce((a, p) => a + p[k], 0);
    return h('figure', { class: 'chart' }, g,
      h('figcaption', {},
        h('div', { class: 'legend' },
          h('span', { class: 'pushed' }, 'pushed ', h('b', { 'data-k': 'chart-pushed' }, fmt(total('pushed')))),
          h('span', { class: 'popped' }, 'popped ', h('b', { 'data-k': 'chart-popped' }, fmt(total('popped')))),
          h('span', { class: 'acked' }, 'acked ', h('b', { 'data-k': 'chart-acked' }, fmt(total('acked'))))),
        h('div', { class: 'muted' }, s.length
          ? `${s.length} samples of ${tp.intervalSeconds} s (${span}), messages per interval; pops and acks over HTTP`
          : 'No samples yet: the first HTTP worker takes one every ' + tp.intervalSeconds + ' s.')));
  }

  /* ------------------------------------------------------------ views */
  async function viewOverview() {
    const [ov, queues, workers, tp, dlq] = await Promise.all([
      get('/api/v1/resources/overview'), get('/api/v1/resources/queues'), get('/api/v1/dashboard/workers'),
      get('/api/v1/dashboard/throughput'), get('/api/v1/dlq?limit=1')]);
    const last = tp.samples.length ? tp.samples[tp.samples.length - 1] : null;
    const per = (k) => last && last.seconds > 0 ? rate(last[k] / last.seconds) : rate(0);
    const backlog = queues.queues.reduce((a, q) => a + q.messages.pending, 0);
    return [
      h('h1', {}, 'Overview'),
      h('div', { class: 'tiles' },
        tile('queues', 'Queues', fmt(ov.queues)),
        tile('partitions', 'Partitions', fmt(ov.partitions)),
        tile('in-per-second', 'Messages in / s', per('pushed')),
        tile('out-per-second', 'Messages out / s', per('popped')),
        tile('backlog', 'Backlog (pending)', fmt(backlog)),
        tile('processing', 'Leased (processing)', fmt(ov.messages.processing)),
        tile('dlq', 'Dead letters', fmt(dlq.total)),
        tile('workers', 'HTTP workers', fmt(workers.workers.length)),
        tile('connections', 'Open connections', fmt(workers.connections))),
      h('h2', {}, 'Throughput, all queues'),
      chart(tp, 'messages per interval, all queues'),
      h('h2', {}, 'Queues'),
      table(['Queue', 'Namespace', 'Task', '#Partitions', '#Messages', '#Pending', '#Processing'],
        queues.queues.map((q) => h('tr', { 'data-queue': q.name },
          h('td', {}, h('a', { href: '#/queues/' + enc(q.name) }, q.name)),
          h('td', {}, q.namespace), h('td', {}, q.task),
          num('partitions', q.partitions), num('total', q.messages.total),
          num('pending', q.messages.pending), num('processing', q.messages.processing))), 'No queues yet.'),
      h('h2', {}, 'HTTP workers'),
      table(['Worker', 'PID', 'Started', '#Connections', '#Parked pops', '#Requests', 'Listening'],
        workers.workers.map((w) => h('tr', {},
          h('td', {}, w.worker), h('td', {}, w.pid), h('td', {}, ago(w.startedAt)),
          num('connections', w.connections), num('parked', w.parkedPops), num('requests', w.requests),
          h('td', {}, w.listening ? 'yes' : 'no'))), 'No worker is running (queen_streams.http_port = 0?).'),
    ];
  }

  async function viewQueue(name) {
    const [st, groups, tp] = await Promise.all([
      get('/api/v1/status/queues/' + enc(name)), get('/api/v1/consumer-groups'),
      get('/api/v1/dashboard/throughput?queue=' + enc(name))]);
    const mine = groups.filter((g) => g.queueName === name);
    const details = await Promise.all(mine.map((g) => get('/api/v1/consumer-groups/' + enc(g.name))));
    const t = st.totals;
    return [
      h('h1', {}, 'Queue ', h('span', { class: 'mono' }, name)),
      h('div', { class: 'tiles' },
        tile('total', 'Messages', fmt(t.total)), tile('pending', 'Pending', fmt(t.pending)),
        tile('processing', 'Processing', fmt(t.processing)), tile('completed', 'Completed', fmt(t.completed)),
        tile('dead', 'Dead letters', fmt(t.deadLetter))),
      h('h2', {}, 'Throughput'),
      chart(tp, 'messages per interval, queue ' + name),
      h('h2', {}, 'Partitions'),
      table(['Partition', '#Messages', '#Backlog', '#Processing', '#Dead letters', 'Newest message', 'Last activity'],
        st.partitions.map((p) => h('tr', { 'data-partition': p.name },
          h('td', {}, p.name), num('total', p.messages.total), num('backlog', p.messages.pending),
          num('processing', p.messages.processing), num('dead', p.messages.deadLetter),
          h('td', {}, ago(p.newestMessage)), h('td', {}, ago(p.lastActivity))))),
      h('h2', {}, 'Consumer groups'),
      table(['Group', 'Partition', '#Lag (messages)', '#Lag (s)', 'Lease', 'Worker', '#Consumed'],
        mine.flatMap((g, i) => ((details[i][name] || {}).partitions || []).map((p) =>
          h('tr', { 'data-group': g.name, 'data-partition': p.partition },
            h('td', {}, h('a', { href: '#/groups/' + enc(g.name) }, g.name === '__QUEUE_MODE__' ? '(queue mode)' : g.name)),
            h('td', {}, p.partition), num('lag', p.offsetLag, p.offsetLag > 0 ? 'lag' : ''), num('time-lag', p.timeLagSeconds),
            h('td', {}, p.leaseActive ? h('span', { class: 'badge on' }, 'leased') : h('span', { class: 'muted' }, 'none')),
            h('td', { class: 'mono' }, p.workerId || ''), num('consumed', p.totalConsumed)))),
        'No consumer group reads this queue.'),
    ];
  }

  async function viewGroups() {
    const groups = await get('/api/v1/consumer-groups');
    return [
      h('h1', {}, 'Consumer groups'),
      table(['Group', 'Queue', 'State', 'Mode', '#Members', '#Partitions lagging', '#Total lag', '#Max lag (s)'],
        groups.map((g) => h('tr', { 'data-group': g.name, 'data-queue': g.queueName },
          h('td', {}, h('a', { href: '#/groups/' + enc(g.name) }, g.name === '__QUEUE_MODE__' ? '(queue mode)' : g.name)),
          h('td', {}, h('a', { href: '#/queues/' + enc(g.queueName) }, g.queueName)),
          h('td', {}, g.state), h('td', {}, g.subscriptionMode || ''), num('members', g.members),
          num('lagging', g.partitionsWithLag), num('lag', g.totalLag, g.totalLag > 0 ? 'lag' : ''),
          num('time-lag', g.maxTimeLag))), 'No consumer groups yet.'),
    ];
  }

  async function viewGroup(name) {
    const doc = await get('/api/v1/consumer-groups/' + enc(name));
    const out = [h('h1', {}, 'Consumer group ', h('span', { class: 'mono' }, name)),
      h('p', {}, h('a', { href: '#/groups' }, '← all groups'))];
    for (const [queue, q] of Object.entries(doc)) {
      const lag = q.partitions.reduce((a, p) => a + p.offsetLag, 0);
      out.push(h('section', { 'data-queue': queue },
        h('h2', {}, 'Queue ', h('a', { href: '#/queues/' + enc(queue) }, queue), ' — lag ',
          h('span', { 'data-k': 'queue-lag' }, fmt(lag))),
        h('div', { class: 'row' },
          h('button', { type: 'button', class: 'danger', id: 'seek-' + queue, 'data-action': 'seek-end',
            onclick: () => act(`Seek ${name} on ${queue} to the end? Unread messages are skipped.`,
              () => api('POST', `/api/v1/consumer-groups/${enc(name)}/queues/${enc(queue)}/seek`, { toEnd: true }),
              `${name} on ${queue} now starts after the newest message.`) }, 'Seek to end')),
        table(['Partition', '#Lag (messages)', '#Lag (s)', 'Lease', 'Worker', '#Consumed', 'Last consumed message'],
          q.partitions.map((p) => h('tr', { 'data-partition': p.partition },
            h('td', {}, p.partition), num('lag', p.offsetLag, p.offsetLag > 0 ? 'lag' : ''), num('time-lag', p.timeLagSeconds),
            h('td', {}, p.leaseActive ? h('span', { class: 'badge on' }, 'leased') : h('span', { class: 'muted' }, 'none')),
            h('td', { class: 'mono' }, p.workerId || ''), num('consumed', p.totalConsumed), h('td', {}, ago(p.lastConsumedAt)))))));
    }
    if (out.length === 2) out.push(h('p', { class: 'muted' }, 'This group reads no queue.'));
    return out;
  }

  const dlqFilter = { queue: '', consumerGroup: '', offset: 0, limit: 50 };
  async function viewDlq() {
    const qs = new URLSearchParams({ limit: dlqFilter.limit, offset: dlqFilter.offset });
    if (dlqFilter.queue) qs.set('queue', dlqFilter.queue);
    if (dlqFilter.consumerGroup) qs.set('consumerGroup', dlqFilter.consumerGroup);
    const doc = await get('/api/v1/dlq?' + qs);
    const form = h('form', { class: 'filters', onsubmit: (ev) => {
      ev.preventDefault();
      dlqFilter.queue = form.querySelector('#dlq-queue').value.trim();
      dlqFilter.consumerGroup = form.querySelector('#dlq-group').value.trim();
      dlqFilter.offset = 0;
      render();
    } },
    h('label', {}, 'Queue', h('input', { id: 'dlq-queue', value: dlqFilter.queue })),
    h('label', {}, 'Consumer group', h('input', { id: 'dlq-group', value: dlqFilter.consumerGroup })),
    h('button', { type: 'submit' }, 'Filter'));
    const page = (d) => () => { dlqFilter.offset = Math.max(0, dlqFilter.offset + d * dlqFilter.limit); render(); };
    return [
      h('h1', {}, 'Dead letters ', h('span', { class: 'badge', 'data-k': 'dlq-total' }, fmt(doc.total))),
      form,
      table(['Queue', 'Partition', 'Transaction', 'Group', 'Error', '#Retries', 'Failed', 'Payload', 'Actions'],
        doc.messages.map((m) => h('tr', { 'data-transaction': m.transactionId, 'data-partition-id': m.partitionId },
          h('td', {}, m.queue), h('td', {}, m.partition), h('td', { class: 'mono' }, m.transactionId),
          h('td', {}, m.consumerGroup === '__QUEUE_MODE__' ? '(queue mode)' : m.consumerGroup),
          h('td', {}, m.errorMessage || ''), num('retries', m.retryCount), h('td', {}, ago(m.failedAt)),
          h('td', { class: 'mono payload' }, JSON.stringify(m.data).slice(0, 200)),
          h('td', {}, h('div', { class: 'row' },
            h('button', { type: 'button', 'data-action': 'requeue', id: 'requeue-' + m.transactionId,
              onclick: () => act(null, () => api('POST', `/api/v1/messages/${enc(m.partitionId)}/${enc(m.transactionId)}/retry`),
                `${m.transactionId} requeued on ${m.queue}/${m.partition}.`) }, 'Requeue'),
            h('button', { type: 'button', class: 'danger', 'data-action': 'delete', id: 'delete-' + m.transactionId,
              onclick: () => act(`Delete the dead letter ${m.transactionId} for good?`,
                () => api('DELETE', `/api/v1/messages/${enc(m.partitionId)}/${enc(m.transactionId)}`),
                `${m.transactionId} deleted.`) }, 'Delete'))))),
        'The dead-letter queue is empty.'),
      h('div', { class: 'row' },
        h('button', { type: 'button', disabled: dlqFilter.offset === 0, onclick: page(-1) }, 'Previous'),
        h('span', { class: 'muted' }, `${doc.total ? dlqFilter.offset + 1 : 0}–${dlqFilter.offset + doc.messages.length} of ${doc.total}`),
        h('button', { type: 'button', disabled: dlqFilter.offset + doc.messages.length >= doc.total, onclick: page(1) }, 'Next')),
    ];
  }

  async function viewStreams() {
    const doc = await get('/api/v1/dashboard/streams');
    const out = [h('h1', {}, 'Streams')];
    if (!doc.queries.length) out.push(h('p', { class: 'muted' }, 'No stream query is registered.'));
    for (const q of doc.queries) {
      out.push(h('section', { 'data-query': q.name },
        h('h2', {}, h('span', { class: 'mono' }, q.name), ' ',
          h('span', { class: 'muted' }, `${q.sourceQueue} → ${q.sinkQueue || '(no sink)'}`)),
        h('div', { class: 'tiles' },
          tile('state-rows', 'State rows', fmt(q.stateRows)), tile('total-lag', 'Lag (messages)', fmt(q.totalLag)),
          h('div', { class: 'tile' }, h('div', { class: 'label' }, 'Last state write'), h('div', {}, ago(q.lastStateWriteAt))),
          h('div', { class: 'tile' }, h('div', { class: 'label' }, 'Consumer group'), h('div', { class: 'mono' }, q.consumerGroup))),
        table(['Partition', '#Last offset', '#Cursor', '#Lag', 'Lease', 'Last lease', '#State rows', 'Last state write'],
          q.partitions.map((p) => h('tr', { 'data-partition': p.partition },
            h('td', {}, p.partition), num('last-offset', p.lastOffset), num('cursor', p.cursor),
            num('lag', p.lag, p.lag > 0 ? 'lag' : ''),
            h('td', {}, p.leaseActive ? h('span', { class: 'badge on' }, 'leased') : h('span', { class: 'muted' }, 'none')),
            h('td', {}, ago(p.lastLeaseAt)), num('state-rows', p.stateRows), h('td', {}, ago(p.lastStateWriteAt)))),
          'The source queue has no partitions yet.')));
    }
    return out;
  }

  async function viewMaintenance() {
    const [push, pop] = await Promise.all([get('/api/v1/system/maintenance'), get('/api/v1/system/maintenance/pop')]);
    const toggle = (label, id, on, path, what) => h('section', { class: 'card', 'data-mode': id },
      h('h2', {}, label, ' ', h('span', { class: 'badge ' + (on ? 'on' : 'off'), 'data-k': id }, on ? 'on' : 'off')),
      h('p', {}, what),
      h('button', { type: 'button', class: on ? 'primary' : 'danger', id: 'toggle-' + id,
        onclick: () => act(on ? null : `Turn ${label.toLowerCase()} on?`, () => api('POST', path, { enabled: !on }),
          `${label} is now ${on ? 'off' : 'on'}.`) }, on ? 'Turn off' : 'Turn on'));
    return [
      h('h1', {}, 'Maintenance'),
      h('div', { class: 'split' },
        toggle('Push maintenance', 'push', push.maintenanceMode, '/api/v1/system/maintenance',
          `Pushes are buffered instead of written (${fmt(push.bufferedMessages)} buffered); turning it off replays them.`),
        toggle('Pop maintenance', 'pop', pop.popMaintenanceMode, '/api/v1/system/maintenance/pop',
          'Pops answer empty; nothing is leased.')),
    ];
  }

  /* ------------------------------------------------------------ actions */
  async function act(question, call, done) {
    if (question && !window.confirm(question)) return;
    busy = true;
    try {
      const res = await call();
      if (res && res.success === false) flash((res.error || 'the server refused') + '', true);
      else flash(done);
    } catch (e) {
      flash(e.message, true);
    } finally {
      busy = false;
    }
    await render();
  }

  /* ------------------------------------------------------------ routing */
  function route() {
    const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
    switch (parts[0]) {
      case 'queues': return parts[1] ? ['queue', () => viewQueue(parts[1])] : ['overview', viewOverview];
      case 'groups': return parts[1] ? ['group', () => viewGroup(parts[1])] : ['groups', viewGroups];
      case 'dlq': return ['dlq', viewDlq];
      case 'streams': return ['streams', viewStreams];
      case 'maintenance': return ['maintenance', viewMaintenance];
      default: return ['overview', viewOverview];
    }
  }

  let generation = 0;
  async function render(keepFocus) {
    const gen = ++generation;
    const [name, view] = route();
    const main = $('#view');
    const focusId = keepFocus && document.activeElement && document.activeElement.id;
    document.body.dataset.state = 'loading';
    for (const a of document.querySelectorAll('nav a')) {
      if (a.dataset.nav === (name === 'queue' ? 'overview' : name === 'group' ? 'groups' : name)) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    let kids;
    try {
      kids = await view();
    } catch (e) {
      kids = [h('h1', {}, 'Cannot show this view'), h('p', { class: 'error', 'data-k': 'error' }, e.message)];
    }
    if (gen !== generation) return;	/* a newer render (another view) started meanwhile */
    main.replaceChildren(...kids.flat());
    if (focusId && document.getElementById(focusId)) document.getElementById(focusId).focus();
    $('#updated').textContent = 'Updated ' + new Date().toLocaleTimeString() +
      (store.tenant ? ' · tenant ' + store.tenant : '') + (store.token ? ' · signed in' : '');
    renders++;
    document.body.dataset.view = name;
    document.body.dataset.render = String(renders);
    document.body.dataset.state = 'ready';
  }

  function start() {
    setupLogin();
    $('#refresh').addEventListener('click', () => render(true));
    window.addEventListener('hashchange', () => { $('#flash').replaceChildren(); render().then(() => $('#view').focus()); });
    setInterval(() => {
      if ($('#autorefresh').checked && !busy && $('#login').hidden && document.visibilityState === 'visible' &&
          !(document.activeElement && /^(INPUT|SELECT|TEXTAREA)$/.test(document.activeElement.tagName)))
        render(true);
    }, REFRESH_MS);
    render();
  }
  document.addEventListener('DOMContentLoaded', start);
})();
