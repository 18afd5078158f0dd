// The conflict feed, newest first: GET /v1/conflicts?before=&limit= (the last page below a
// position — the head when live, the chosen moment when travelling in time), merged with the
// waits refused as deadlocks (DeadlockRefused, docs/protocol.md#deadlock), read from the log
// like the messages view: GET /v1/events?type=DeadlockRefused over the last WINDOW positions.
import { clock, countLabel, h, shortId } from '../dom.js';

const LIMIT = 40;
const WINDOW = 1000;

function conflictItem(c) {
  return h('li', { class: `conflict${c.forced ? ' forced' : ''}`, dataset: { position: c.position } },
    h('div', { class: 'line1' },
      h('span', { class: 'time mono', title: c.occurred_at }, clock(c.occurred_at)),
      h('span', { class: 'mono path', title: c.path }, c.path),
      c.forced ? h('span', { class: 'badge badge-forced' }, 'forced') : h('span', { class: 'badge badge-refused' }, 'refused')),
    h('div', { class: 'line2 muted' },
      h('span', { class: 'issue' }, c.issue), ` ${c.actor_key || ''} `,
      h('span', { class: 'vs' }, c.forced ? 'took over from' : 'blocked by'), ' ',
      h('span', { class: 'issue' }, c.holder_issue), ` ${c.holder_actor_key || ''}`,
      c.holder_path !== c.path ? h('span', { class: 'mono small' }, ` (${c.holder_path})`) : null));
}

/** The actor of each session the page has seen (leases, waiters), to name a cycle's steps. */
function actorsKnown(shared, event) {
  const names = new Map([[event.data.session_id, event.data.actor_key]]);
  for (const [sid, leases] of shared.leasesBySession || []) if (leases[0] && leases[0].actor_key) names.set(sid, leases[0].actor_key);
  for (const waiters of (shared.waitsByLine || new Map()).values()) for (const w of waiters) names.set(w.session_id, w.actor_key);
  return names;
}

/** A refused wait: who would have waited for what, and the cycle it would have closed
 *  (each session waits for a resource held by the next; the last one's by the first). */
function deadlockItem(e, shared) {
  const d = e.data;
  const cycle = d.cycle || [];
  const names = actorsKnown(shared, e);
  const who = (sid) => (names.get(sid) ? h('span', { class: 'actor', title: sid }, names.get(sid)) : shortId(sid, 4));
  const arrow = () => h('span', { class: 'arrow' }, ' → ');
  return h('li', { class: 'conflict deadlock', dataset: { position: e.position, type: 'DeadlockRefused' } },
    h('div', { class: 'line1' },
      h('span', { class: 'time mono', title: e.recorded_at }, clock(e.recorded_at)),
      h('span', { class: 'mono path', title: `${d.kind} ${d.key}` }, d.key),
      h('span', { class: 'badge badge-deadlock', title: 'a wait refused: it would have closed a cycle' }, 'deadlock')),
    h('div', { class: 'line2 muted cycle', title: 'who waits → for what → held by whom' },
      h('span', { class: 'vs' }, 'wait refused: '),
      cycle.map((step) => [who(step.session_id), arrow(), h('span', { class: 'mono small key' }, step.key), arrow()]),
      cycle.length ? who(cycle[0].session_id) : null));
}

export function conflictsView() {
  return {
    name: 'conflicts',
    title: 'Conflicts',
    triggers: ['ClaimConflict', 'DeadlockRefused'],
    async load(ctx) {
      const before = ctx.asOf !== null ? ctx.asOf + 1 : Number.MAX_SAFE_INTEGER;
      const top = ctx.asOf !== null ? ctx.asOf : Math.max(ctx.head, await ctx.headKnown());
      const [conflicts, deadlocks] = await Promise.all([
        ctx.get('/v1/conflicts', { before, limit: LIMIT }),
        // A server without waiting lines has no such events: the feed is then conflicts only.
        ctx.get('/v1/events', { type: 'DeadlockRefused', after: Math.max(0, top - WINDOW), limit: WINDOW })
          .catch(() => ({ events: [] })),
      ]);
      const refused = deadlocks.events.filter((e) => e.type === 'DeadlockRefused' && e.position <= top);
      return { conflicts: conflicts.conflicts, deadlocks: refused };
    },
    render(body, ctx, panel) {
      const rows = [
        ...body.conflicts.map((c) => ({ position: c.position, item: () => conflictItem(c) })),
        ...body.deadlocks.map((e) => ({ position: e.position, item: () => deadlockItem(e, ctx.shared) })),
      ].sort((a, b) => b.position - a.position).slice(0, LIMIT);
      panel.setCount(`${countLabel(body.conflicts.length, LIMIT)} recent${body.deadlocks.length ? ` · ${body.deadlocks.length} ${body.deadlocks.length === 1 ? 'deadlock' : 'deadlocks'}` : ''}`);
      if (!rows.length) return h('p', { class: 'empty' }, 'No contention recorded.');
      return h('ol', { class: 'feed' }, rows.map((r) => r.item()));
    },
  };
}
