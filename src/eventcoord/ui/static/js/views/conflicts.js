// The conflict feed, newest first: GET /v1/conflicts?before=&limit= (the last page below a
// position — the head when live, the chosen moment when travelling in time).
import { clock, countLabel, h } from '../dom.js';

const LIMIT = 40;

export function conflictsView() {
  return {
    name: 'conflicts',
    title: 'Conflicts',
    triggers: ['ClaimConflict'],
    async load(ctx) {
      const before = ctx.asOf !== null ? ctx.asOf + 1 : Number.MAX_SAFE_INTEGER;
      return ctx.get('/v1/conflicts', { before, limit: LIMIT });
    },
    render(body, ctx, panel) {
      const rows = [...body.conflicts].reverse();
      panel.setCount(`${countLabel(rows.length, LIMIT)} recent`);
      if (!rows.length) return h('p', { class: 'empty' }, 'No contention recorded.');
      return h('ol', { class: 'feed' }, rows.map((c) => h('li', { class: `conflict${c.forced ? ' forced' : ''}`, dataset: { position: c.position } },
        h('div', { class: 'line1' },
          h('span', { class: 'time mono', title: c.occurred_at }, clock(c.occurred_at)),
          h('span', { class: 'mono path', title: c.path }, c.path),
          c.forced ? h('span', { class: 'badge badge-forced' }, 'forced') : h('span', { class: 'badge badge-refused' }, 'refused')),
        h('div', { class: 'line2 muted' },
          h('span', { class: 'issue' }, c.issue), ` ${c.actor_key || ''} `,
          h('span', { class: 'vs' }, c.forced ? 'took over from' : 'blocked by'), ' ',
          h('span', { class: 'issue' }, c.holder_issue), ` ${c.holder_actor_key || ''}`,
          c.holder_path !== c.path ? h('span', { class: 'mono small' }, ` (${c.holder_path})`) : null))));
    },
  };
}
