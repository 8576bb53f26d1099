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
  /* a table scrolls inside its own box, so a phone-width page never does */
  function table(head, rows, empty) {
    if (!rows.length) return h('p', { class: 'muted' }, empty || 'Nothing here.');
    return h('div', { class: 'scroll' }, h('table', {}, h('thead', {}, h('tr', {}, head.map((c) =>
      h('th', { scope: 'col', class: /^#/.test(c) ? 'num' : null }, c.replace(/^#/, ''))))), h('tbody', {}, rows)));
  }
  const QM = '__QUEUE_MODE__';
  const groupName = (g) => g === QM ? '(queue mode)' : g;
  const secs = (n) => (n === null || n === undefined) ? '–'
    : Number(n).toLocaleString('en-US', { maximumFractionDigits: 1, minimumFractionDigits: 1 });
  const numS = (key, n, extra) => h('td', { class: 'num' + (extra ? ' ' + extra : ''), 'data-k': key }, secs(n));
  function defs(pairs) {
    return h('dl', { class: 'defs' }, pairs.map(([t, d]) => [h('dt', {}, t), h('dd', {}, d)]));
  }
  const TERMS = {
    backlog: ['Backlog', 'messages a consumer group has not acknowledged yet, over all partitions of the queue ' +
      '(queue mode, consumers that pop without a group, counts as the group "(queue mode)"). The same number as ' +
      'queen_streams.queue_stats.backlog_messages and the gauge queen_streams_consumer_group_backlog_messages.'],
    lag: ['Lag (s)', 'the age of the oldest message the group has not acknowledged; 0 without a backlog ' +
      '(queue_stats.lag_seconds, queen_streams_consumer_group_lag_seconds).'],
    lagMsgs: ['Lag (messages)', 'on one partition: offsets past the group\'s cursor there.'],
  };
  const STATES = [
    ['Lagging', 'on some partition the group\'s oldest unacknowledged message is older than 300 s.'],
    ['Stable', 'not lagging, and the group has acknowledged messages.'],
    ['Dead', 'not lagging, and the group has acknowledged nothing yet on any partition it has a cursor on ' +
      '(Queen\'s term: it says nothing about whether a consumer is connected; a group that just subscribed is ' +
      '"Dead" until its first acknowledgement).'],
    ['–', 'the group has no cursor yet (it subscribed, or only dead letters name it).'],
  ];
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
  /* the sign-in button appears once the listener asked for a token (auth = jwt) */
  function needsLogin() { $('#show-login').hidden = false; }
  function showLogin(reason) {
    needsLogin();
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
  /* lines of messages per second at each interval's end, on a time axis */
  function chart(tp, title) {
    const W = 760, H = 220, L = 48, R = 10, T = 12, B = 28;
    const s = tp.samples || [];
    const span = s.reduce((a, p) => a + p.seconds, 0);
    const spanTxt = span < 120 ? `${span} s` : `${Math.round(span / 60)} min`;
    const keys = ['pushed', 'popped', 'acked'];
    const per = (p, k) => p.seconds > 0 ? p[k] / p.seconds : 0;
    const top = Math.max(1, ...s.flatMap((x) => keys.map((k) => per(x, k))));
    const step = Math.pow(10, Math.floor(Math.log10(top)));
    const max = [1, 2, 2.5, 5, 10].map((m) => m * step).find((m) => m >= top);
    const t1 = s.length ? Date.parse(s[s.length - 1].at) : 0;
    const t0 = s.length ? Date.parse(s[0].at) - s[0].seconds * 1000 : 0;
    const x = (p) => L + (W - L - R) * (t1 > t0 ? (Date.parse(p.at) - t0) / (t1 - t0) : 1);
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
      const lab = (t) => new Date(t).toISOString().slice(11, span < 600 ? 19 : 16) + ' UTC';
      g.append(svg('text', { x: L, y: H - 8, 'text-anchor': 'start' }, lab(t0)));
      g.append(svg('text', { x: W - R, y: H - 8, 'text-anchor': 'end' }, lab(t1)));
    }
    for (const k of keys) {
      if (!s.length) break;
      /* each interval is a step from its start to its end */
      const pts = [[L, y(per(s[0], k))]];
      s.forEach((p) => pts.push([x(p), y(per(p, k))]));
      g.append(svg('polyline', { class: k, points: pts.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(' ') }));
    }
    const total = (k) => s.reduce((a, p) => a + p[k], 0);
    const open = s.length && s[s.length - 1].partial;
    return h('figure', { class: 'chart' }, g,
      h('figcaption', {},
        h('div', { class: 'legend' },
          h('span', { class: 'pushed' }, 'pushed ', h('b', { 'data-k': 'chart-pushed' }, fmt(total('pushed')))),
          h('span', { class: 'popped' }, 'popped ', h('b', { 'data-k': 'chart-popped' }, fmt(total('popped')))),
          h('span', { class: 'acked' }, 'acked ', h('b', { 'data-k': 'chart-acked' }, fmt(total('acked'))))),
        h('div', { class: 'muted' }, s.length
          ? `Messages per second over the last ${spanTxt}: ${s.length - (open ? 1 : 0)} intervals of ${tp.intervalSeconds} s` +
            (open ? ', and the one still open (since the newest sample)' : '') +
            '; the totals are messages. Pops and acks over HTTP.'
          : 'No samples yet: the first HTTP worker takes one when it starts, then every ' + tp.intervalSeconds + ' s.')));
  }

  /* ------------------------------------------------------------ views */
  /* the last closed interval's rate (the open one while it is the only one) */
  function lastRate(tp) {
    const s = tp.samples || [];
    const closed = s.filter((p) => !p.partial);
    const last = closed.length ? closed[closed.length - 1] : s[s.length - 1];
    return (k) => last && last.seconds > 0 ? rate(last[k] / last.seconds) : rate(0);
  }
  /* queue_stats rows of one queue: backlog summed, lag the largest */
  function queueSums(rows) {
    return { backlog: rows.reduce((a, r) => a + r.backlog, 0),
      lag: rows.reduce((a, r) => Math.max(a, Number(r.lagSeconds)), 0),
      groups: rows.filter((r) => r.consumerGroup !== QM || r.backlog > 0 || r.deadLetters > 0).length };
  }

  async function viewOverview() {
    const [ov, queues, workers, tp, dlq, gs] = await Promise.all([
      get('/api/v1/resources/overview'), get('/api/v1/resources/queues'), get('/api/v1/dashboard/workers'),
      get('/api/v1/dashboard/throughput'), get('/api/v1/dlq?limit=1'), get('/api/v1/dashboard/groups')]);
    const per = lastRate(tp);
    const all = queueSums(gs.groups);
    const byQueue = (name) => queueSums(gs.groups.filter((r) => r.queue === name));
    return [
      h('h1', {}, 'Overview'),
      h('div', { class: 'tiles' },
        tile('queues', 'Queues', fmt(ov.queues)),
        tile('partitions', 'Partitions', fmt(ov.partitions)),
        tile('in-per-second', 'Messages in / s', per('pushed')),
        tile('out-per-second', 'Messages out / s', per('popped')),
        tile('backlog', 'Backlog (all groups)', fmt(all.backlog)),
        tile('max-lag', 'Oldest unacknowledged (s)', secs(all.lag)),
        tile('processing', 'Leased (processing)', fmt(ov.messages.processing)),
        tile('dlq', 'Dead letters', fmt(dlq.total)),
        tile('workers', 'HTTP workers', fmt(workers.workers.length)),
        tile('connections', 'Open connections', fmt(workers.connections))),
      defs([TERMS.backlog, TERMS.lag]),
      h('h2', {}, 'Throughput, all queues'),
      chart(tp, 'messages per second, all queues'),
      h('h2', {}, 'Queues'),
      table(['Queue', 'Namespace', 'Task', '#Partitions', '#Messages', '#Groups', '#Backlog', '#Lag (s)', '#Processing'],
        queues.queues.map((q) => {
          const b = byQueue(q.name);
          return h('tr', { 'data-queue': q.name },
            h('td', {}, h('a', { href: '#/queues/' + enc(q.name) }, q.name)),
            h('td', {}, q.namespace), h('td', {}, q.task),
            num('partitions', q.partitions), num('total', q.messages.total), num('groups', b.groups),
            num('backlog', b.backlog, b.backlog > 0 ? 'lag' : ''), numS('lag-seconds', b.lag),
            num('processing', q.messages.processing));
        }), 'No queues yet.'),
      h('h2', {}, 'HTTP workers'),
      table(['Worker', 'PID', 'Started', '#Connections', '#Parked pops', '#Requests', 'Listening'],
        workers.workers.map((w) => h('tr', {},
          h('td', {}, w.worker), h('td', {}, w.pid), h('td', {}, ago(w.startedAt)),
          num('connections', w.connections), num('parked', w.parkedPops), num('requests', w.requests),
          h('td', {}, w.listening ? 'yes' : 'no'))), 'No worker is running (queen_streams.http_port = 0?).'),
    ];
  }

  const leaseCell = (on) => h('td', {}, on ? h('span', { class: 'badge on' }, 'leased') : h('span', { class: 'muted' }, 'none'));

  async function viewQueue(name) {
    const [st, groups, tp, gs] = await Promise.all([
      get('/api/v1/status/queues/' + enc(name)), get('/api/v1/consumer-groups'),
      get('/api/v1/dashboard/throughput?queue=' + enc(name)), get('/api/v1/dashboard/groups')]);
    const mine = groups.filter((g) => g.queueName === name);
    const details = await Promise.all(mine.map((g) => get('/api/v1/consumer-groups/' + enc(g.name))));
    const rows = gs.groups.filter((r) => r.queue === name);
    const sum = queueSums(rows);
    const state = (g) => (mine.find((m) => m.name === g) || {}).state || '–';
    return [
      h('h1', {}, 'Queue ', h('span', { class: 'mono' }, name)),
      h('div', { class: 'tiles' },
        tile('total', 'Messages stored', fmt(st.totals.total)),
        tile('backlog', 'Backlog (all groups)', fmt(sum.backlog)),
        tile('max-lag', 'Oldest unacknowledged (s)', secs(sum.lag)),
        tile('processing', 'Leased (processing)', fmt(st.totals.processing)),
        tile('dead', 'Dead letters', fmt(st.totals.deadLetter))),
      h('h2', {}, 'Consumer groups'),
      table(['Group', 'State', '#Backlog', '#Lag (s)', '#Partitions with backlog', '#Leased partitions', '#Dead letters'],
        rows.map((r) => h('tr', { 'data-backlog-group': r.consumerGroup },
          h('td', {}, r.consumerGroup === QM ? '(queue mode)' : h('a', { href: '#/groups/' + enc(r.consumerGroup) }, r.consumerGroup)),
          h('td', {}, state(r.consumerGroup)),
          num('backlog', r.backlog, r.backlog > 0 ? 'lag' : ''), numS('lag-seconds', r.lagSeconds),
          num('backlog-partitions', r.partitionsWithBacklog), num('leased', r.leasedPartitions),
          num('dead', r.deadLetters))), 'No consumer group reads this queue.'),
      defs([TERMS.backlog, TERMS.lag]),
      h('h2', {}, 'Throughput'),
      chart(tp, 'messages per second, queue ' + name),
      h('h2', {}, 'Partitions'),
      table(['Partition', '#Messages', '#Processing', '#Dead letters', 'Newest message', 'Last activity'],
        st.partitions.map((p) => h('tr', { 'data-partition': p.name },
          h('td', {}, h('a', { href: `#/messages?queue=${enc(name)}&partition=${enc(p.name)}` }, p.name)),
          num('total', p.messages.total), num('processing', p.messages.processing), num('dead', p.messages.deadLetter),
          h('td', {}, ago(p.newestMessage)), h('td', {}, ago(p.lastActivity))))),
      h('h2', {}, 'Lag per partition'),
      h('p', { class: 'muted' }, 'Where the group has a cursor. A partition it has no cursor on yet counts whole in its backlog above.'),
      table(['Group', 'Partition', '#Lag (messages)', '#Lag (s)', 'Lease', 'Worker', '#Consumed'],
        mine.flatMap((g, i) => ((details[i][name] || {}).partitions || []).map((p) =>
          h('tr', { 'data-group': g.name, 'data-partition': p.partition },
            h('td', {}, h('a', { href: '#/groups/' + enc(g.name) }, groupName(g.name))),
            h('td', {}, p.partition), num('lag', p.offsetLag, p.offsetLag > 0 ? 'lag' : ''), num('time-lag', p.timeLagSeconds),
            leaseCell(p.leaseActive), h('td', { class: 'mono' }, p.workerId || ''), num('consumed', p.totalConsumed)))),
        'No consumer group has a cursor on this queue.'),
    ];
  }

  async function viewGroups() {
    const [groups, gs] = await Promise.all([get('/api/v1/consumer-groups'), get('/api/v1/dashboard/groups')]);
    const meta = (r) => groups.find((g) => g.name === r.consumerGroup && g.queueName === r.queue) || {};
    return [
      h('h1', {}, 'Consumer groups'),
      table(['Group', 'Queue', 'State', 'Mode', '#Members', '#Backlog', '#Lag (s)', '#Partitions with backlog',
        '#Leased partitions', '#Dead letters'],
        gs.groups.map((r) => {
          const g = meta(r);
          return h('tr', { 'data-group': r.consumerGroup, 'data-queue': r.queue },
            h('td', {}, r.consumerGroup === QM ? '(queue mode)' : h('a', { href: '#/groups/' + enc(r.consumerGroup) }, r.consumerGroup)),
            h('td', {}, h('a', { href: '#/queues/' + enc(r.queue) }, r.queue)),
            h('td', { 'data-k': 'state' }, g.state || '–'), h('td', {}, g.subscriptionMode || ''),
            num('members', g.members === undefined ? 0 : g.members),
            num('backlog', r.backlog, r.backlog > 0 ? 'lag' : ''), numS('lag-seconds', r.lagSeconds),
            num('backlog-partitions', r.partitionsWithBacklog), num('leased', r.leasedPartitions),
            num('dead', r.deadLetters));
        }), 'No consumer groups yet.'),
      h('h2', {}, 'What the columns and states mean'),
      defs([TERMS.backlog, TERMS.lag,
        ['Members', 'partitions of the queue where the group has a cursor.'],
        ['Partitions with backlog', 'partitions where the group has messages to acknowledge; a partition it has no ' +
          'cursor on counts whole, unless it subscribed "new" or from a timestamp.'],
        ['Leased partitions', 'partitions the group holds a live lease on (a consumer is working there).']]),
      h('h3', {}, 'States'),
      defs(STATES),
    ];
  }

  async function viewGroup(name) {
    const [doc, gs] = await Promise.all([get('/api/v1/consumer-groups/' + enc(name)), get('/api/v1/dashboard/groups')]);
    const out = [h('h1', {}, 'Consumer group ', h('span', { class: 'mono' }, groupName(name))),
      h('p', {}, h('a', { href: '#/groups' }, '← all groups'))];
    for (const [queue, q] of Object.entries(doc)) {
      const lag = q.partitions.reduce((a, p) => a + p.offsetLag, 0);
      const r = gs.groups.find((x) => x.queue === queue && x.consumerGroup === name) || {};
      out.push(h('section', { 'data-queue': queue },
        h('h2', {}, 'Queue ', h('a', { href: '#/queues/' + enc(queue) }, queue)),
        h('div', { class: 'tiles' },
          tile('backlog', 'Backlog', fmt(r.backlog)), tile('lag-seconds', 'Lag (s)', secs(r.lagSeconds)),
          tile('queue-lag', 'Lag on its cursors (messages)', fmt(lag)), tile('dead', 'Dead letters', fmt(r.deadLetters))),
        h('div', { class: 'row' },
          h('button', { type: 'button', class: 'danger', id: 'seek-' + queue, 'data-action': 'seek-end',
            onclick: () => act(`Seek ${name} on ${queue} to the end? Unread messages are skipped.`,
              () => api('POST', `/api/v1/consumer-groups/${enc(name)}/queues/${enc(queue)}/seek`, { toEnd: true }),
              `${name} on ${queue} now starts after the newest message.`) }, 'Seek to end')),
        table(['Partition', '#Lag (messages)', '#Lag (s)', 'Lease', 'Worker', '#Consumed', 'Last consumed message'],
          q.partitions.map((p) => h('tr', { 'data-partition': p.partition },
            h('td', {}, p.partition), num('lag', p.offsetLag, p.offsetLag > 0 ? 'lag' : ''), num('time-lag', p.timeLagSeconds),
            leaseCell(p.leaseActive), h('td', { class: 'mono' }, p.workerId || ''), num('consumed', p.totalConsumed),
            h('td', {}, ago(p.lastConsumedAt)))))));
    }
    if (out.length === 2) out.push(h('p', { class: 'muted' }, 'This group reads no queue.'));
    out.push(defs([TERMS.backlog, TERMS.lag, TERMS.lagMsgs]));
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

  const sumOf = (rows, k) => rows.reduce((a, r) => a + Number(r[k] || 0), 0);

  async function viewStreams() {
    const [decl, doc] = await Promise.all([get('/streams/v1/streams'), get('/api/v1/dashboard/streams')]);
    const out = [h('h1', {}, 'Streams'), h('h2', {}, 'Declared streams')];
    if (!decl.streams.length) out.push(h('p', { class: 'muted' }, 'No stream is declared (queen_streams.create_stream).'));
    for (const d of decl.streams) {
      const parts = d.partitions.filter((p) => p.partition !== null);
      const errs = d.partitions.filter((p) => p.last_error).sort((a, b) => String(b.last_error_at).localeCompare(String(a.last_error_at)));
      out.push(h('section', { 'data-stream': d.name, class: 'stream' },
        h('h3', {}, h('span', { class: 'mono' }, d.name), ' ',
          h('span', { class: 'badge ' + (d.paused ? 'on' : 'off'), 'data-k': 'paused' }, d.paused ? 'paused' : 'running'), ' ',
          h('span', { class: 'muted' }, `${d.sourceQueue} → ${d.sinkQueue || '(no sink)'}`)),
        h('div', { class: 'tiles' },
          tile('lag', 'Lag (messages)', fmt(sumOf(parts, 'lag'))),
          tile('open-windows', 'Open windows', fmt(sumOf(d.partitions, 'open_windows'))),
          tile('rate', 'Events / s', rate(sumOf(d.partitions, 'events_per_second'))),
          tile('events', 'Events', fmt(sumOf(d.partitions, 'events'))),
          tile('late', 'Late events', fmt(sumOf(d.partitions, 'late'))),
          tile('errors', 'Errors', fmt(sumOf(d.partitions, 'errors')))),
        errs.length ? h('p', { class: 'error' }, 'Last error ', ago(errs[0].last_error_at), ': ', errs[0].last_error) : null,
        h('div', { class: 'row' },
          d.paused
            ? h('button', { type: 'button', class: 'primary', id: 'resume-' + d.name, 'data-action': 'resume',
              onclick: () => act(null, () => api('POST', `/streams/v1/streams/${enc(d.name)}/resume`),
                `${d.name} resumed: the stream workers process it again.`) }, 'Resume')
            : h('button', { type: 'button', class: 'danger', id: 'pause-' + d.name, 'data-action': 'pause',
              onclick: () => act(`Pause the stream ${d.name}? Its windows stop until it is resumed.`,
                () => api('POST', `/streams/v1/streams/${enc(d.name)}/pause`),
                `${d.name} paused.`) }, 'Pause')),
        table(['Partition', '#Lag', '#Open windows', 'Watermark', '#Events', '#Late', '#Errors', 'Last cycle'],
          parts.map((p) => h('tr', { 'data-partition': p.partition },
            h('td', {}, p.partition), num('lag', p.lag, p.lag > 0 ? 'lag' : ''), num('open-windows', p.open_windows),
            h('td', {}, p.watermark ? h('time', { datetime: p.watermark }, p.watermark.replace('T', ' ').slice(0, 19)) : '–'),
            num('events', p.events), num('late', p.late), num('errors', p.errors, p.errors > 0 ? 'lag' : ''),
            h('td', {}, ago(p.last_cycle_at)))),
          'The source queue has no partitions yet.')));
    }
    out.push(defs([
      ['Lag', 'messages on the source queue the stream\'s consumer group has not consumed yet (queen_streams.stream_stats.lag_messages).'],
      ['Open windows', 'windows (state rows) not yet emitted.'],
      ['Late events', 'events older than the watermark less the allowed lateness: dropped, or sent to the late queue.'],
      ['Events / s', 'events processed per second since the stream\'s statistics began (stream_status.events_per_second).'],
      ['Paused', 'the stream workers skip a paused stream; its source backlog grows until it is resumed.']]));

    out.push(h('h2', {}, 'Stream queries (cycle protocol)'));
    if (!doc.queries.length) out.push(h('p', { class: 'muted' }, 'No stream query is registered.'));
    for (const q of doc.queries) {
      out.push(h('section', { 'data-query': q.name },
        h('h3', {}, h('span', { class: 'mono' }, q.name), ' ',
          h('span', { class: 'muted' }, `${q.sourceQueue} → ${q.sinkQueue || '(no sink)'}`)),
        h('div', { class: 'tiles' },
          tile('state-rows', 'State rows', fmt(q.stateRows)), tile('total-lag', 'Lag (messages)', fmt(q.totalLag)),
          h('div', { class: 'tile' }, h('div', { class: 'label' }, 'Last state write'), h('div', {}, ago(q.lastStateWriteAt))),
          h('div', { class: 'tile' }, h('div', { class: 'label' }, 'Consumer group'), h('div', { class: 'mono' }, q.consumerGroup))),
        table(['Partition', '#Last offset', '#Cursor', '#Lag', 'Lease', 'Last lease', '#State rows', 'Last state write'],
          q.partitions.map((p) => h('tr', { 'data-partition': p.partition },
            h('td', {}, p.partition), num('last-offset', p.lastOffset), num('cursor', p.cursor),
            num('lag', p.lag, p.lag > 0 ? 'lag' : ''), leaseCell(p.leaseActive),
            h('td', {}, ago(p.lastLeaseAt)), num('state-rows', p.stateRows), h('td', {}, ago(p.lastStateWriteAt)))),
          'The source queue has no partitions yet.')));
    }
    return out;
  }

  /* ------------------------------------------------------------ messages */
  const STATUSES = ['pending', 'processing', 'completed', 'dead_letter'];
  const statusBadge = (st) => h('span', { class: 'badge st-' + st, 'data-k': 'status' }, st.replace('_', ' '));
  /* a datetime-local value (the browser's time zone) as ISO, or '' */
  const isoOf = (v) => { const t = Date.parse(v); return v && !isNaN(t) ? new Date(t).toISOString() : ''; };
  const localOf = (iso) => {
    const t = Date.parse(iso);
    if (!iso || isNaN(t)) return '';
    const d = new Date(t - new Date(t).getTimezoneOffset() * 60000);
    return d.toISOString().slice(0, 19);
  };

  async function viewMessages(q) {
    const f = { queue: q.get('queue') || '', partition: q.get('partition') || '', status: q.get('status') || '',
      from: q.get('from') || '', to: q.get('to') || '', offset: Math.max(0, Number(q.get('offset')) || 0) };
    const limit = 50;
    const qs = new URLSearchParams({ limit, offset: f.offset });
    for (const k of ['queue', 'partition', 'status', 'from', 'to']) if (f[k]) qs.set(k, f[k]);
    const [doc, queues] = await Promise.all([get('/api/v1/messages?' + qs), get('/api/v1/resources/queues')]);
    const go = (o) => {
      const n = new URLSearchParams();
      for (const [k, v] of Object.entries(o)) if (v) n.set(k, v);
      location.hash = '#/messages' + (n.toString() ? '?' + n : '');
    };
    const form = h('form', { class: 'filters', id: 'msg-filters', onsubmit: (ev) => {
      ev.preventDefault();
      const v = (id) => form.querySelector(id).value.trim();
      go({ queue: v('#msg-queue'), partition: v('#msg-partition'), status: v('#msg-status'),
        from: isoOf(v('#msg-from')), to: isoOf(v('#msg-to')) });
    } },
    h('label', {}, 'Queue', h('select', { id: 'msg-queue' }, h('option', { value: '' }, 'all'),
      queues.queues.map((x) => h('option', { value: x.name, selected: x.name === f.queue }, x.name)))),
    h('label', {}, 'Partition', h('input', { id: 'msg-partition', value: f.partition, size: 12 })),
    h('label', {}, 'Status', h('select', { id: 'msg-status' }, h('option', { value: '' }, 'any'),
      STATUSES.map((x) => h('option', { value: x, selected: x === f.status }, x.replace('_', ' '))))),
    h('label', {}, 'Created from', h('input', { id: 'msg-from', type: 'datetime-local', step: 1, value: localOf(f.from) })),
    h('label', {}, 'to', h('input', { id: 'msg-to', type: 'datetime-local', step: 1, value: localOf(f.to) })),
    h('button', { type: 'submit' }, 'Filter'),
    h('button', { type: 'button', onclick: () => go({}) }, 'Clear'));
    const n = doc.messages.length;
    return [
      h('h1', {}, 'Messages'),
      form,
      h('p', { class: 'muted' }, 'Newest first; open a message for its payload and trace. Status: the message\'s state in queue mode ' +
        '(consumers without a group); a consumer group\'s progress is its cursor, under Consumer groups.'),
      table(['Created', 'Queue', 'Partition', 'Transaction', 'Status'],
        doc.messages.map((m) => h('tr', { 'data-transaction': m.transactionId, 'data-partition': m.partition, 'data-queue': m.queue },
          h('td', {}, h('time', { datetime: m.createdAt, title: m.createdAt }, m.createdAt.replace('T', ' ').slice(0, 19))),
          h('td', {}, m.queue), h('td', {}, m.partition),
          h('td', { class: 'mono' }, h('a', { href: `#/messages/${enc(m.partitionId)}/${enc(m.transactionId)}` }, m.transactionId)),
          h('td', {}, statusBadge(m.status)))),
        'No message matches.'),
      h('div', { class: 'row' },
        h('button', { type: 'button', disabled: f.offset === 0, onclick: () => go({ ...f, offset: Math.max(0, f.offset - limit) }) }, 'Newer'),
        h('span', { class: 'muted', 'data-k': 'msg-range' }, n ? `${f.offset + 1}–${f.offset + n}` : 'none'),
        h('button', { type: 'button', disabled: n < limit, onclick: () => go({ ...f, offset: f.offset + limit }) }, 'Older')),
    ];
  }

  async function viewMessage(pid, txn) {
    const [m, tr] = await Promise.all([
      get(`/api/v1/messages/${enc(pid)}/${enc(txn)}`), get(`/api/v1/traces/${enc(pid)}/${enc(txn)}`)]);
    const traces = tr.traces || [];
    const field = (k, label, v) => [h('dt', {}, label), h('dd', { 'data-k': k }, v)];
    const dead = m.errorMessage !== null && m.errorMessage !== undefined;
    return [
      h('h1', {}, 'Message ', h('span', { class: 'mono' }, txn)),
      h('p', {}, h('a', { href: `#/messages?queue=${enc(m.queue)}&partition=${enc(m.partition)}` }, `← ${m.queue}/${m.partition}`)),
      h('dl', { class: 'defs fields' },
        field('queue', 'Queue', m.queue), field('partition', 'Partition', m.partition),
        field('transaction', 'Transaction', m.transactionId), field('id', 'Message id', m.id),
        field('created', 'Created', m.createdAt), field('status', 'Status (queue mode)', statusBadge(m.status)),
        field('trace-id', 'Trace id', m.traceId || '–'),
        dead ? field('error', 'Dead letter', `${m.errorMessage} (retries: ${m.retryCount})`) : null),
      dead ? h('div', { class: 'row' },
        h('button', { type: 'button', class: 'primary', id: 'requeue-message', 'data-action': 'requeue',
          onclick: () => act(null, () => api('POST', `/api/v1/messages/${enc(pid)}/${enc(txn)}/retry`),
            `${txn} requeued on ${m.queue}/${m.partition}.`) }, 'Requeue the dead letter')) : null,
      h('h2', {}, 'Payload'),
      h('pre', { class: 'payload-full', 'data-k': 'payload' }, JSON.stringify(m.payload === undefined ? m.data : m.payload, null, 2)),
      h('h2', {}, 'Consumer groups'),
      table(['Group', 'Consumed', 'Lease expires'], (m.consumerGroups || []).map((g) => h('tr', { 'data-group': g.name },
        h('td', {}, groupName(g.name)), h('td', { 'data-k': 'consumed' }, g.consumed ? 'yes' : 'no'),
        h('td', {}, g.leaseExpiresAt || '–'))), 'No consumer group has a cursor on this partition.'),
      h('h2', {}, 'Trace ', h('span', { class: 'badge', 'data-k': 'trace-count' }, fmt(traces.length))),
      table(['At', 'Group', 'Event', 'Names', 'Data'], traces.map((t) => h('tr', { 'data-trace': t.id },
        h('td', {}, t.createdAt), h('td', {}, groupName(t.consumerGroup || '')), h('td', { 'data-k': 'event' }, t.eventType),
        h('td', {}, (t.traceNames || []).join(', ')), h('td', { class: 'mono payload', 'data-k': 'data' }, JSON.stringify(t.data)))),
      'No trace event was recorded for this message (POST /api/v1/traces).'),
    ];
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
    const [path, query] = location.hash.replace(/^#\/?/, '').split('?');
    const parts = path.split('/').map(decodeURIComponent);
    const q = new URLSearchParams(query || '');
    switch (parts[0]) {
      case 'queues': return parts[1] ? ['queue', () => viewQueue(parts[1])] : ['overview', viewOverview];
      case 'groups': return parts[1] ? ['group', () => viewGroup(parts[1])] : ['groups', viewGroups];
      case 'messages': return parts[2] ? ['message', () => viewMessage(parts[1], parts[2])] : ['messages', () => viewMessages(q)];
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
      const nav = { queue: 'overview', group: 'groups', message: 'messages' }[name] || name;
      if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    let kids;
    try {
      kids = await view();
    } catch (e) {
      kids = [h('h1', {}, 'Cannot show this view'), h('p', { class: 'error', 'data-k': 'error' }, e.message)];
    }
    if (gen !== generation) return;	/* a newer render (another view) started meanwhile */
    main.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined));
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
    if (store.token || store.tenant) needsLogin();
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
