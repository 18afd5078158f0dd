// Messages across channels: the MessagePosted events among the last WINDOW positions of
// the log (GET /v1/events?type=MessagePosted&after=; bounded: one page), newest first.
// Live, new messages arrive straight from the stream. Session ids in channels and bodies
// are drawn short (the whole id on hover) and, where the page knows it, by the actor's name.
import { clock, h, shortId } from '../dom.js';

const WINDOW = 300;
const SHOW = 40;
const LOOKUPS = 20; // at most this many unknown sessions looked up per read
const SESSION_ID = /\bs-[0-9a-f]{16,}\b/g; // a session id as the server writes it

/** The session ids a message mentions (its channel and its body). */
function idsIn(e) {
  return `${e.data.channel} ${e.data.body}`.match(SESSION_ID) || [];
}

export function messagesView(app) {
  let items = [];
  let loaded = null; // the last read's events: a repaint of the same read keeps live arrivals
  const names = new Map(); // session id → actor key (a session keeps its actor), null: unknown
  const asked = new Set();

  function learn(e) {
    if (e.data.session_id && e.data.actor_key) names.set(e.data.session_id, e.data.actor_key);
  }

  /** Ask the server for the actors of sessions the page has not seen (bounded, once each). */
  function lookUp(ctx, events) {
    const unknown = [...new Set(events.flatMap(idsIn))].filter((id) => !names.has(id) && !asked.has(id)).slice(0, LOOKUPS);
    for (const id of unknown) asked.add(id);
    return Promise.all(unknown.map((id) => ctx.get(`/v1/agents/${encodeURIComponent(id)}`)
      .then((body) => names.set(id, body.agent.actor_key), () => names.set(id, null))));
  }

  /** A session id: the actor's name when known, else the id cut in the middle; the whole id on hover. */
  function session(id, named) {
    const actor = names.get(id);
    if (named && actor) return h('span', { class: 'sid who', title: `${id} (${actor})` }, actor);
    const el = shortId(id);
    el.classList.add('sid');
    if (actor) el.title = `${id} (${actor})`;
    return el;
  }

  /** Text with each session id in it drawn by `session` (all of it as text nodes, never HTML). */
  function withIds(text, named) {
    const out = [];
    let at = 0;
    for (const m of text.matchAll(SESSION_ID)) {
      out.push(text.slice(at, m.index), session(m[0], named));
      at = m.index + m[0].length;
    }
    out.push(text.slice(at));
    return out;
  }

  function channel(name) {
    const [kind, rest] = [name.slice(0, name.indexOf(':') + 1), name.slice(name.indexOf(':') + 1)];
    if (kind === 'agent:' && rest.match(SESSION_ID)?.[0] === rest) return [kind, session(rest, true)];
    return withIds(name, false);
  }

  return {
    name: 'messages',
    title: 'Messages',
    triggers: [],
    async load(ctx) {
      const top = ctx.asOf !== null ? ctx.asOf : await ctx.headKnown();
      const body = await ctx.get('/v1/events', { type: 'MessagePosted', after: Math.max(0, top - WINDOW), limit: WINDOW });
      const events = body.events.filter((e) => e.type === 'MessagePosted' && e.position <= top);
      events.forEach(learn);
      await lookUp(ctx, events.slice(-SHOW));
      return events;
    },
    onEvent(ev, ctx) {
      if (ev.type !== 'MessagePosted' || ctx.asOf !== null) return false;
      learn(ev);
      items = [...items, ev].slice(-SHOW);
      lookUp(ctx, [ev]).then((found) => { if (found.length) app.repaint('messages'); });
      return true;
    },
    render(events, ctx, panel) {
      if (events && events !== loaded) {
        loaded = events;
        items = events.slice(-SHOW);
      }
      panel.setCount(`${items.length} recent`);
      if (!items.length) return h('p', { class: 'empty' }, 'No recent messages.');
      return h('ol', { class: 'feed messages' }, [...items].reverse().map((e) => h('li', { class: 'message', dataset: { position: e.position } },
        h('div', { class: 'line1' },
          h('span', { class: 'time mono', title: e.recorded_at }, clock(e.recorded_at)),
          h('span', { class: 'actor', title: e.data.session_id ? `${e.data.actor_key} (session ${e.data.session_id})` : e.data.actor_key },
            e.data.actor_key || e.metadata?.actor_key || '')),
        h('div', { class: 'line2' }, h('span', { class: 'channel mono', title: e.data.channel }, channel(e.data.channel))),
        h('div', { class: 'msg-body' }, withIds(e.data.body, false)))));
    },
  };
}
