// Named leases (leader election, and capacity slots, docs/protocol.md#capacity): GET /v1/named-leases, every
// name ever granted; a name of capacity N answers one row per held slot. Drawn as N slots per
// name — who holds each, its fencing token, when it expires — and the name's waiting line
// (shared by the waits view). The read has no as_of: while travelling it says it shows the present.
import { badge, h, num, untilSpan } from '../dom.js';

const SHOW = 80; // names drawn at most (the read is not paged)

/** Rows of /v1/named-leases → [{name, capacity, slots: [row | null] (length ≥ capacity)}]. */
export function byName(rows) {
  const names = new Map();
  for (const r of rows) {
    if (!names.has(r.name)) names.set(r.name, { name: r.name, capacity: r.capacity || 1, rows: [] });
    names.get(r.name).rows.push(r);
  }
  return [...names.values()].map((n) => {
    // Held slots first (token order), then expired ones not yet taken again, then free ones.
    const taken = n.rows.filter((r) => r.session_id);
    const held = taken.filter((r) => r.held).sort((a, b) => a.fencing_token - b.fencing_token);
    const expired = taken.filter((r) => !r.held).sort((a, b) => a.fencing_token - b.fencing_token);
    const slots = [...held, ...expired];
    while (slots.length < n.capacity) slots.push(null);
    const last = Math.max(0, ...n.rows.map((r) => r.fencing_token || 0));
    return { name: n.name, capacity: n.capacity, held: held.length, slots, lastToken: last };
  });
}

export function namedLeasesView() {
  function slotItem(slot, i) {
    if (!slot) {
      return h('li', { class: 'slot slot-free', dataset: { slot: i + 1 } },
        h('span', { class: 'slot-n' }, `slot ${i + 1}`), h('span', { class: 'muted' }, 'free'));
    }
    const state = slot.held ? 'held' : 'expired';
    return h('li', { class: `slot slot-${state}`, dataset: { slot: i + 1, session: slot.session_id, token: slot.fencing_token } },
      h('span', { class: 'slot-n' }, `slot ${i + 1}`),
      h('span', { class: 'actor', title: slot.session_id }, slot.actor_key || '—'),
      h('span', { class: 'mono token', title: 'fencing token' }, `#${slot.fencing_token}`),
      h('span', { class: 'right muted small', title: slot.expires_at }, slot.held ? ['expires ', untilSpan(slot.expires_at)] : 'expired'));
  }

  return {
    name: 'named-leases',
    title: 'Named leases',
    triggers: ['NamedLeaseAcquired', 'NamedLeaseRenewed', 'NamedLeaseReleased', 'AgentEnded', 'WaitStarted', 'WaitAbandoned'],
    dependsOn: ['waits'],
    async load(ctx) {
      return ctx.get('/v1/named-leases'); // no as_of on this read: always the present
    },
    render(body, ctx, panel) {
      const names = byName(body.leases);
      ctx.shared.namedByName = new Map(names.map((n) => [n.name, n.slots.filter(Boolean)]));
      const held = names.reduce((s, n) => s + n.held, 0);
      panel.setCount(`${num(names.length)} ${names.length === 1 ? 'name' : 'names'} · ${num(held)} held`);
      const past = ctx.asOf !== null
        ? h('p', { class: 'note present-only' }, 'Named leases have no point-in-time read: this is the present, not the moment on the slider.')
        : null;
      if (!names.length) return [past, h('p', { class: 'empty' }, 'No named lease yet.')];
      const waits = ctx.shared.waitsByLine || new Map();
      return [past, h('ol', { class: 'lines' }, names.slice(0, SHOW).map((n) => {
        const line = waits.get(`lease:${n.name}`) || [];
        return h('li', { class: 'named-lease', dataset: { name: n.name, capacity: n.capacity } },
          h('div', { class: 'line-head' },
            h('span', { class: 'mono key' }, n.name),
            n.capacity > 1 ? badge(`${n.capacity} slots`, 'slots') : null,
            h('span', { class: 'muted small' }, n.held ? `${n.held}/${n.capacity} held` : `free · last #${n.lastToken}`),
            line.length ? h('span', { class: 'right waiting-count' }, `${num(line.length)} waiting`) : null),
          n.capacity > 1 || n.slots.some(Boolean) ? h('ol', { class: 'slots' }, n.slots.map(slotItem)) : null);
      })), names.length > SHOW ? h('p', { class: 'note' }, `first ${SHOW} of ${num(names.length)} names shown`) : null];
    },
  };
}
