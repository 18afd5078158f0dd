// The work queue: running, claimed and queued items, each group a bounded page of
// GET /v1/queue?status=&limit= (enqueue order).
import { agoSpan, badge, countLabel, h, shortId } from '../dom.js';

const GROUPS = ['running', 'claimed', 'queued'];
const LIMIT = 50;

export function queueView() {
  return {
    name: 'queue',
    title: 'Work queue',
    triggers: ['WorkEnqueued', 'WorkClaimed', 'WorkStarted', 'WorkFinished', 'WorkRequeued'],
    async load(ctx) {
      const pages = await Promise.all(GROUPS.map((status) => ctx.get('/v1/queue', { status, limit: LIMIT }, { pit: true })));
      return Object.fromEntries(GROUPS.map((g, i) => [g, pages[i].items]));
    },
    render(data, ctx, panel) {
      panel.setCount(GROUPS.map((g) => `${countLabel(data[g].length, LIMIT)} ${g}`).join(' · '));
      const rows = GROUPS.flatMap((g) => data[g].sort((a, b) => b.priority - a.priority));
      if (!rows.length) return h('p', { class: 'empty' }, 'The queue is empty.');
      return h('table', { class: 'grid' },
        h('thead', {}, h('tr', {},
          h('th', {}, 'Issue'), h('th', {}, 'Status'), h('th', { class: 'num' }, 'Prio'),
          h('th', {}, 'Worker'), h('th', { class: 'num' }, 'Since'))),
        h('tbody', {}, rows.map((it) => h('tr', { class: `item item-${it.status}`, title: `item ${it.item_id}`, dataset: { item: it.item_id } },
          h('td', {}, it.issue ? h('span', { class: 'issue' }, it.issue) : shortId(it.item_id, 4),
            h('span', { class: 'project' }, it.project),
            it.fencing_token ? h('span', { class: 'mono token small' }, ` #${it.fencing_token}`) : null),
          h('td', {}, badge(it.status, it.status), it.attempts > 1 ? h('span', { class: 'muted small' }, ` ×${it.attempts}`) : null),
          h('td', { class: 'num mono' }, String(it.priority)),
          h('td', {}, it.actor_key ? h('span', { class: 'actor', title: it.session_id }, it.actor_key) : h('span', { class: 'muted' }, '—')),
          h('td', { class: 'num' }, agoSpan(it.updated_at))))));
    },
  };
}
