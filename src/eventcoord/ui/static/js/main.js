// The dashboard: asks for a token once, paints every view from bounded reads, then
// follows the event stream and refreshes only the views an event touches (at most every
// REFRESH_MS). The history slider switches every view to `as_of` reads.
import * as api from './api.js';
import { $, clock, fill, h, num, tickClocks } from './dom.js';
import { follow } from './stream.js';
import { timeline } from './timeline.js';
import { agentDrawer } from './views/agent-drawer.js';
import { agentsView } from './views/agents.js';
import { claimsView } from './views/claims.js';
import { conflictsView } from './views/conflicts.js';
import { heatmapView } from './views/heatmap.js';
import { leasesView } from './views/leases.js';
import { messagesView } from './views/messages.js';
import { namedLeasesView } from './views/named-leases.js';
import { queueView } from './views/queue.js';
import { waitsView } from './views/waits.js';

const REFRESH_MS = 400;
const RESYNC_MS = 15000; // liveness ages without events: re-read everything now and then

const state = { asOf: null, at: null, head: 0, asOfSupported: null };
let lostAt = null; // when the stream dropped (null while connected)
let headKnown = Promise.resolve(0); // the log head at start (/health), for views that page back from it
const shared = {};
let views = [];
let stream = null;
let rate = [];

const drawer = agentDrawer();
const app = {
  state,
  refresh: (name) => refreshView(views.find((v) => v.name === name)),
  repaint: (name) => { const v = views.find((x) => x.name === name); if (v && v.data !== undefined) paint(v, ctx()); },
  travel,
  showAgent: (sessionId) => drawer.open(sessionId, state.asOf !== null),
};

function ctx() {
  const asOf = state.asOf;
  return {
    asOf,
    at: state.at,
    head: state.head,
    headKnown: () => headKnown,
    shared,
    nowMs: () => (state.asOf !== null && state.at ? Date.parse(state.at) : Date.now()),
    async get(path, params, { pit = false } = {}) {
      const travelling = pit && asOf !== null;
      const body = await api.get(path, travelling ? { ...params, as_of: asOf } : params);
      if (travelling && state.asOf === asOf) noteAsOf(body); // not an answer for an older moment
      return body;
    },
  };
}

function noteAsOf(body) {
  const supported = Boolean(body && body.as_of);
  if (supported && body.as_of.at && state.asOf !== null) {
    state.at = body.as_of.at;
    line.show(state);
  }
  if (state.asOfSupported !== supported) {
    state.asOfSupported = supported;
    $('#asof-warning').hidden = supported;
  }
}

// --- panels ---------------------------------------------------------------------------

function mountPanel(v) {
  const count = h('span', { class: 'count' });
  const error = h('div', { class: 'panel-error', hidden: true });
  const body = h('div', { class: 'body' });
  const panel = h('section', { class: `panel panel-${v.name}`, id: `panel-${v.name}`, dataset: { view: v.name } },
    h('header', {}, h('h2', {}, v.title), count, v.tools || null), error, body, v.footer || null);
  v.seq = 0;
  v.body = body;
  v.panel = panel;
  v.api = {
    setCount: (text) => { count.textContent = text; },
    setError: (err) => {
      error.hidden = !err;
      error.textContent = err ? `Could not read: ${err.message}` : '';
    },
  };
  return panel;
}

function paint(v, c) {
  const t0 = performance.now();
  fill(v.body, v.render(v.data, c, v.api));
  tickClocks(c.nowMs(), v.body);
  if (!document.body.dataset.ready) performance.measure(`render:${v.name}`, { start: t0 }); // first paint only
}

async function refreshView(v) {
  if (!v) return;
  const seq = ++v.seq;
  const c = ctx();
  v.panel.classList.add('busy');
  try {
    const data = await v.load(c);
    if (seq !== v.seq) return;
    v.data = data;
    paint(v, c);
    v.api.setError(null);
    // Views drawing what this one shares (ctx.shared) repaint with it, without a read.
    for (const other of views) if (other.dependsOn && other.dependsOn.includes(v.name) && other.data !== undefined) paint(other, c);
  } catch (err) {
    if (err instanceof api.Unauthorized) return signOut('The token was refused. Enter a valid token.');
    // The server unreachable (no answer at all): the stream notices too, the banner says
    // so and every panel re-reads on reconnect; keep the last data meanwhile.
    if (err instanceof api.Offline) return;
    if (!(err instanceof api.ApiError)) console.error(err); // a bug of the page: make it loud
    if (seq === v.seq) v.api.setError(err);
  } finally {
    if (seq === v.seq) v.panel.classList.remove('busy');
  }
}

const refreshAll = () => Promise.all(views.map(refreshView));

// --- live: dirty views refreshed at most every REFRESH_MS -----------------------------

const dirty = new Set();
let timer = null;

function markDirty(names) {
  for (const n of names) dirty.add(n);
  if (timer === null && state.asOf === null) timer = setTimeout(flush, REFRESH_MS);
}

function flush() {
  timer = null;
  if (state.asOf !== null) return;
  const names = [...dirty];
  dirty.clear();
  for (const v of views) if (names.includes(v.name)) refreshView(v);
}

function onEvent(ev) {
  state.head = Math.max(state.head, ev.position);
  line.setHead(state.head);
  rate.push(performance.now());
  const names = [];
  const c = ctx();
  for (const v of views) {
    if (v.triggers.includes(ev.type)) names.push(v.name);
    if (v.onEvent && v.onEvent(ev, c, v.api) && v.data !== undefined) paint(v, c);
  }
  if (names.length) markDirty(names);
}

const PILL = { live: 'Live', connecting: 'Connecting…', disconnected: 'Disconnected', unauthorized: 'Token refused' };
let streamStatus = 'connecting';

/** The header pill: the stream's state, except that a board showing the past is not "Live". */
function showPill() {
  const pill = $('#conn');
  const past = state.asOf !== null && streamStatus === 'live';
  pill.className = `conn conn-${past ? 'history' : streamStatus}`;
  pill.textContent = past ? 'History' : PILL[streamStatus] || '';
  pill.title = past ? `showing the board as of position ${state.asOf}; the stream stays connected` : '';
}

function onStatus(status, detail) {
  const banner = $('#disconnected');
  streamStatus = status;
  showPill();
  if (status === 'live') {
    banner.hidden = true;
    if (lostAt !== null) {
      lostAt = null;
      markDirty(views.map((v) => v.name)); // catch up on whatever the stream cannot replay (liveness)
    }
  } else if (status === 'disconnected') {
    lostAt = lostAt || new Date().toISOString();
    banner.hidden = false;
    fill(banner, h('strong', {}, 'Disconnected from the server'),
      ` since ${clock(lostAt)} — reconnecting by itself (next try in ${Math.ceil(detail.retryMs / 100) / 10}s). `,
      h('span', { class: 'muted' }, `Resumes after position ${num(detail.last ?? 0)}; what you see may be out of date.`));
  } else if (status === 'unauthorized') {
    signOut('The token was refused. Enter a valid token.');
  }
}

// --- time travel ----------------------------------------------------------------------

async function travel(position) {
  state.asOf = position === null || position >= state.head ? null : Math.max(1, position);
  state.at = null;
  document.body.classList.toggle('travelling', state.asOf !== null);
  showPill();
  if (state.asOf !== null) {
    const wanted = state.asOf;
    try {
      const body = await api.get('/v1/events', { after: wanted - 1, limit: 1 });
      if (state.asOf !== wanted) return; // the slider moved on meanwhile
      if (body.events.length) state.at = body.events[0].recorded_at;
    } catch {
      /* the as_of answers carry the moment too */
    }
  } else {
    $('#asof-warning').hidden = true;
    state.asOfSupported = null;
  }
  line.show(state);
  await refreshAll();
}

// --- start, sign in, sign out ---------------------------------------------------------

const line = timeline(app);

async function start() {
  $('#login').hidden = true;
  document.body.classList.remove('signed-out');
  // The head and the views' reads go out together. The stream follows from that head
  // once the board is painted (a browser opens only six connections to one server; the
  // first paint gets them all), so nothing committed meanwhile is missed.
  headKnown = api.health().then((health) => {
    state.head = Math.max(state.head, health.head || 0);
    line.setHead(state.head);
    return state.head;
  }, () => state.head);
  await refreshAll();
  document.body.dataset.ready = '1';
  performance.mark('dashboard-ready');
  // The frame after the data reached the DOM: when the first paint of data happened.
  requestAnimationFrame(() => setTimeout(() => performance.mark('dashboard-painted'), 0));
  const head = await headKnown;
  if (!api.token.get()) return; // refused while painting: the prompt is back
  if (stream) stream.stop();
  stream = follow({ after: head, bearer: () => api.token.get(), onEvent, onStatus });
  api.get('/v1/events', { after: 0, limit: 1 }).then((b) => {
    if (b.events.length) line.setStart(b.events[0].position, b.events[0].recorded_at);
  }).catch(() => {});
}

function signOut(message) {
  if (stream) stream.stop();
  stream = null;
  api.token.clear();
  document.body.classList.add('signed-out');
  $('#login').hidden = false;
  $('#login-error').textContent = message || '';
  $('#login-token').value = '';
  $('#login-token').focus();
}

async function signIn(event) {
  event.preventDefault();
  const value = $('#login-token').value.trim();
  if (!value) return;
  $('#login-error').textContent = '';
  try {
    await api.get('/v1/agents', { limit: 1 }, { bearer: value });
  } catch (err) {
    $('#login-error').textContent = err instanceof api.Unauthorized ? 'That token was refused.' : `Could not check the token: ${err.message}`;
    return;
  }
  api.token.set(value, $('#login-remember').checked);
  start();
}

function boot() {
  views = [agentsView(app), leasesView(app), heatmapView(app), conflictsView(app), claimsView(app), queueView(app),
    messagesView(app), waitsView(app), namedLeasesView(app)];
  fill($('#board'), views.map(mountPanel));
  $('#timeline-slot').replaceWith(line.el);
  document.body.append(drawer.el);
  $('#login-form').addEventListener('submit', signIn);
  $('#signout').addEventListener('click', () => signOut(''));
  setInterval(() => {
    tickClocks(ctx().nowMs());
    const now = performance.now();
    rate = rate.filter((t) => now - t < 10000);
    $('#rate').textContent = `${(rate.length / 10).toFixed(1)} ev/s`;
  }, 1000);
  setInterval(() => { if (state.asOf === null && api.token.get()) markDirty(views.map((v) => v.name)); }, RESYNC_MS);
  if (api.token.get()) start();
  else signOut('');
}

boot();
