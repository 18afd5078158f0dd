// Issue leases with their effective state and fencing tokens. GET /v1/leases?limit=.
// The state in the order of docs/protocol.md#effective-state-in-order, as seen by an
// onlooker (no session of its own): a human holder → human_held; a live holder → held; a
// stale one → reclaimable.
import { agoSpan, badge, countLabel, h, shortId } from '../dom.js';

const PAGE = 100;
const MAX = 2000;

export function effectiveState(lease) {
  if (lease.kind === 'human') return 'human_held';
  return lease.live ? 'held' : 'reclaimable';
}

export function leasesView(app) {
  let limit = PAGE;
  const more = h('button', { class: 'more', type: 'button', hidden: true, onclick: () => { limit = Math.min(limit + PAGE, MAX); app.refresh('leases'); } }, 'Show more');
  return {
    name: 'leases',
    title: 'Leases',
    triggers: ['LeaseGranted', 'LeaseReleased', 'AgentEnded', 'AgentHeartbeat', 'AgentRegistered'],
    footer: more,
    dependsOn: ['waits'], // each lease's waiting line
    async load(ctx) {
      return ctx.get('/v1/leases', { limit }, { pit: true });
    },
    render(body, ctx, panel) {
      const leases = body.leases;
      const bySession = new Map();
      for (const l of leases) {
        if (!bySession.has(l.session_id)) bySession.set(l.session_id, []);
        bySession.get(l.session_id).push(l);
      }
      ctx.shared.leasesBySession = bySession;
      ctx.shared.leasesByIssue = new Map(leases.map((l) => [l.issue, l])); // the waits view's holders
      const stale = leases.filter((l) => effectiveState(l) === 'reclaimable').length;
      panel.setCount(`${countLabel(leases.length, limit)} held${stale ? ` · ${stale} reclaimable` : ''}`);
      more.hidden = leases.length < limit || limit >= MAX;
      if (!leases.length) return h('p', { class: 'empty' }, 'No issue is leased.');
      const lines = ctx.asOf === null ? ctx.shared.waitsByLine || new Map() : new Map(); // waits: present only
      return h('table', { class: 'grid' },
        h('thead', {}, h('tr', {},
          h('th', {}, 'Issue'), h('th', {}, 'State'), h('th', { class: 'num' }, 'Fencing'),
          h('th', {}, 'Holder'), h('th', { class: 'num' }, 'Held for'))),
        h('tbody', {}, leases.map((l) => {
          const state = effectiveState(l);
          return h('tr', { class: `lease lease-${state}`, dataset: { issue: l.issue } },
            h('td', {}, h('span', { class: 'issue' }, l.issue), h('span', { class: 'project' }, l.project)),
            h('td', {}, badge(state, state), lines.has(`issue:${l.issue}`)
              ? h('span', { class: 'badge badge-waiting', title: 'sessions waiting in line for it' }, `${lines.get(`issue:${l.issue}`).length} waiting`) : null),
            h('td', { class: 'num mono token', title: 'fencing token' }, `#${l.fencing_token}`),
            h('td', {}, l.actor_key ? h('span', { class: 'actor', title: l.session_id }, l.actor_key) : shortId(l.session_id)),
            h('td', { class: 'num' }, agoSpan(l.granted_at)));
        })));
    },
  };
}
