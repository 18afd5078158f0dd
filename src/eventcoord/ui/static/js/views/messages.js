// Messages across channels: the MessagePosted events among the last WINDOW positions of
// the log (GET /v1/events?type=MessagePosted&after=; bounded: one page), newest first.
// Live, new messages arrive straight from the stream.
import { clock, h } from '../dom.js';

const WINDOW = 300;
const SHOW = 40;

export function messagesView() {
  let items = [];
  return {
    name: 'messages',
    title: 'Messages',
    triggers: [],
    async load(ctx) {
      const top = ctx.asOf !== null ? ctx.asOf : await ctx.headKnown();
      const body = await ctx.get('/v1/events', { type: 'MessagePosted', after: Math.max(0, top - WINDOW), limit: WINDOW });
      return body.events.filter((e) => e.type === 'MessagePosted' && e.position <= top);
    },
    onEvent(ev, ctx, panel) {
      if (ev.type !== 'MessagePosted' || ctx.asOf !== null) return false;
      items = [...items, ev].slice(-SHOW);
      return true;
    },
    render(events, ctx, panel) {
      if (events) items = events.slice(-SHOW);
      panel.setCount(`${items.length} recent`);
      if (!items.length) return h('p', { class: 'empty' }, 'No recent messages.');
      return h('ol', { class: 'feed messages' }, [...items].reverse().map((e) => h('li', { class: 'message', dataset: { position: e.position } },
        h('div', { class: 'line1' },
          h('span', { class: 'time mono', title: e.recorded_at }, clock(e.recorded_at)),
          h('span', { class: 'channel mono' }, e.data.channel),
          h('span', { class: 'actor muted' }, e.data.actor_key || e.metadata?.actor_key || '')),
        h('div', { class: 'msg-body' }, e.data.body))));
    },
  };
}
