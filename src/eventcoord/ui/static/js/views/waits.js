// Waiting lines (docs/protocol.md#waiting): GET /v1/waits, one row per waiter ordered by key then place,
// grouped here into one line per resource (issue, path pattern, named lease) in FIFO order.
// Beside each line: its current holders, when the page already knows them (the leases,
// file-claims and named-leases views share what they read). Hand-offs (a grant carrying
// handed_off: true) come from the stream. /v1/waits has no as_of: while the slider is in the
// past the view says it shows the present.
import { agoSpan, badge, clock, dot, h, num, shortId } from '../dom.js';

const SHOW_LINES = 60; // of the first page of /v1/waits (1,000 rows): draw at most this many lines …
const SHOW_WAITERS = 12; // … and this many waiters per line, saying how many more there are
const RECENT = 6; // hand-offs kept for the "Handed off" list

const lineKey = (kind, key) => `${kind}:${key}`;

/** Rows of /v1/waits → [{kind, key, waiters: [...] (by place)}], in the server's order. */
export function lines(rows) {
  const byLine = new Map();
  for (const w of rows) {
    const k = lineKey(w.kind, w.key);
    if (!byLine.has(k)) byLine.set(k, { kind: w.kind, key: w.key, waiters: [] });
    byLine.get(k).waiters.push(w);
  }
  for (const line of byLine.values()) line.waiters.sort((a, b) => a.place - b.place);
  return [...byLine.values()];
}

/** Whether two path patterns may cover a common file, as far as the page can tell without the
 *  server's matcher: equal, or one a directory (trailing /) containing the other. Globs: only
 *  when equal — the page shows no holder rather than a wrong one. */
export function overlaps(a, b) {
  if (a === b) return true;
  return (a.endsWith('/') && b.startsWith(a)) || (b.endsWith('/') && a.startsWith(b));
}

export function waitsView(app) {
  const handoffs = new Map(); // line key → the last hand-off seen on the stream
  let recent = [];

  function holdersOf(line, shared) {
    if (line.kind === 'issue') {
      if (!shared.leasesByIssue) return null; // the leases view has not painted yet
      const lease = shared.leasesByIssue.get(line.key);
      return lease ? [{ session_id: lease.session_id, actor_key: lease.actor_key, fencing_token: lease.fencing_token, live: lease.live }] : [];
    }
    if (line.kind === 'files') {
      if (!shared.fileClaims) return null;
      const waiting = new Set(line.waiters.map((w) => w.session_id));
      return shared.fileClaims.filter((c) => !waiting.has(c.session_id) && overlaps(c.path, line.key))
        .map((c) => ({ session_id: c.session_id, actor_key: c.actor_key, live: c.live, issue: c.issue, path: c.path }));
    }
    if (!shared.namedByName) return null;
    return (shared.namedByName.get(line.key) || []).filter((s) => s.held).map((s) => ({ session_id: s.session_id, actor_key: s.actor_key, fencing_token: s.fencing_token, live: true }));
  }

  function holderChip(line, holder) {
    const handed = handoffs.get(lineKey(line.kind, line.key));
    const wasHanded = handed && handed.session_id === holder.session_id;
    return h('span', { class: 'holder', dataset: { session: holder.session_id || '' }, title: holder.session_id || 'no session' },
      dot(holder.live ? 'live' : 'stale', holder.live ? 'holder live' : 'holder stale (reclaimable)'),
      h('span', { class: 'actor' }, holder.actor_key || '—'),
      holder.fencing_token ? h('span', { class: 'mono token small' }, ` #${holder.fencing_token}`) : null,
      holder.path && holder.path !== line.key ? h('span', { class: 'mono small muted' }, ` ${holder.path}`) : null,
      holder.issue ? h('span', { class: 'issue small' }, ` ${holder.issue}`) : null,
      wasHanded ? h('span', { class: 'badge badge-handoff', title: `handed off from the line at ${clock(handed.at)}` }, 'handed off') : null);
  }

  function holderPart(line, ctx) {
    if (ctx.asOf !== null) return h('span', { class: 'muted small' }, 'holders: see the other views');
    const holders = holdersOf(line, ctx.shared);
    if (holders === null) return h('span', { class: 'muted small' }, 'holder: …');
    if (!holders.length) return h('span', { class: 'muted small', title: 'not among the holders this page has read' }, 'holder not on this page');
    return h('span', { class: 'holders' }, h('span', { class: 'muted small' }, 'held by '),
      holders.slice(0, 3).map((x) => holderChip(line, x)),
      holders.length > 3 ? h('span', { class: 'muted small' }, ` +${holders.length - 3}`) : null);
  }

  function waiterRow(w) {
    return h('li', { class: 'waiter', dataset: { session: w.session_id, place: w.place } },
      h('span', { class: 'place', title: w.place === 1 ? 'next' : `place ${w.place}` }, String(w.place)),
      h('span', { class: 'actor', title: w.session_id }, w.actor_key),
      w.issue ? h('span', { class: 'issue small', title: 'for issue' }, w.issue) : null,
      shortId(w.session_id),
      h('span', { class: 'right' },
        h('span', { class: 'muted small', title: w.since }, `since ${clock(w.since)} · `),
        h('span', { class: 'waited', title: 'waiting for' }, agoSpan(w.since))));
  }

  function lineItem(line, ctx) {
    const more = line.waiters.length - SHOW_WAITERS;
    return h('li', { class: `wait-line wait-${line.kind}`, dataset: { kind: line.kind, key: line.key } },
      h('div', { class: 'line-head' },
        badge(line.kind, `kind-${line.kind}`),
        h('span', { class: line.kind === 'issue' ? 'issue key' : 'mono key', title: line.key }, line.key),
        holderPart(line, ctx),
        h('span', { class: 'right waiting-count' }, `${num(line.waiters.length)} waiting`)),
      h('ol', { class: 'waiters' }, line.waiters.slice(0, SHOW_WAITERS).map(waiterRow),
        more > 0 ? h('li', { class: 'note' }, `and ${num(more)} more`) : null));
  }

  function recentList() {
    if (!recent.length) return null;
    return h('div', { class: 'handoffs' }, h('h3', {}, 'Handed off'),
      h('ol', { class: 'plain' }, [...recent].reverse().map((x) => h('li', { class: 'handoff', dataset: { kind: x.kind, key: x.key } },
        h('span', { class: 'time mono' }, clock(x.at)), ' ', badge(x.kind, `kind-${x.kind}`),
        h('span', { class: x.kind === 'issue' ? 'issue key' : 'mono key' }, x.key),
        h('span', { class: 'muted' }, ' → '), h('span', { class: 'actor' }, x.actor_key),
        x.fencing_token ? h('span', { class: 'mono token small' }, ` #${x.fencing_token}`) : null))));
  }

  function noteHandoff(kind, keys, ev) {
    for (const key of keys) {
      const x = { kind, key, session_id: ev.data.session_id, actor_key: ev.data.actor_key, fencing_token: ev.data.fencing_token, at: ev.recorded_at };
      handoffs.set(lineKey(kind, key), x);
      recent = [...recent, x].slice(-RECENT);
    }
  }

  return {
    name: 'waits',
    title: 'Waits',
    triggers: ['WaitStarted', 'WaitAbandoned', 'LeaseGranted', 'LeaseReleased', 'FilesClaimed', 'FileClaimReleased',
      'NamedLeaseAcquired', 'NamedLeaseReleased', 'AgentEnded'],
    dependsOn: ['leases', 'claims', 'named-leases'],
    async load(ctx) {
      return ctx.get('/v1/waits'); // no as_of on this read: always the present
    },
    onEvent(ev, ctx) {
      if (ctx.asOf !== null || !ev.data || ev.data.handed_off !== true) return false;
      if (ev.type === 'LeaseGranted') noteHandoff('issue', [ev.data.issue], ev);
      else if (ev.type === 'FilesClaimed') noteHandoff('files', ev.data.paths || [], ev);
      else if (ev.type === 'NamedLeaseAcquired') noteHandoff('lease', [ev.data.name], ev);
      else return false;
      return true;
    },
    render(body, ctx, panel) {
      const all = lines(body.waits);
      const byLine = new Map(all.map((l) => [lineKey(l.kind, l.key), l.waiters]));
      ctx.shared.waitsByLine = byLine;
      ctx.shared.waitsBySession = new Map(body.waits.map((w) => [w.session_id, w])); // one line at a time
      const sessions = new Set(body.waits.map((w) => w.session_id)).size;
      panel.setCount(`${num(all.length)} ${all.length === 1 ? 'line' : 'lines'} · ${num(sessions)} waiting`);
      const past = ctx.asOf !== null
        ? h('p', { class: 'note present-only' }, 'Waiting lines have no point-in-time read: this is the present, not the moment on the slider.')
        : null;
      if (!all.length) return [past, h('p', { class: 'empty' }, 'Nobody is waiting.'), recentList()];
      return [past,
        h('ol', { class: 'lines' }, all.slice(0, SHOW_LINES).map((l) => lineItem(l, ctx))),
        all.length > SHOW_LINES ? h('p', { class: 'note' }, `first ${SHOW_LINES} of ${num(all.length)} lines shown`) : null,
        recentList()];
    },
  };
}
