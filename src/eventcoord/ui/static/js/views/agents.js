// Live agents: liveness, the harness each runs in, what each works on (declared
// working_on, leases held, the files it is editing), last sign of life.
// GET /v1/agents?live=&limit= (newest first), paged by growing the limit; the files are
// the claims view's page (GET /v1/file-claims), grouped by session.
import { agoSpan, badge, countLabel, dot, h, shortId } from '../dom.js';

const PAGE = 60;
const MAX = 1000;
const FILES_SHOWN = 3;
// The coding-agent harnesses whose hooks eventcoord answers, by the runtime they register.
const HARNESSES = { claude: 'Claude Code', codex: 'Codex' };

/** The live file claims of each session: Map(session_id → [claims]). */
export function filesBySession(claims) {
  const by = new Map();
  for (const c of claims || []) {
    if (!c.session_id) continue;
    if (!by.has(c.session_id)) by.set(c.session_id, []);
    by.get(c.session_id).push(c);
  }
  return by;
}

function harnessBadge(runtime) {
  if (!runtime) return null;
  const name = HARNESSES[runtime];
  return h('span', { class: `badge badge-harness${name ? '' : ' badge-runtime'}`, dataset: { harness: runtime }, title: name ? `runs in ${name}: coordinated by its hooks` : `runtime ${runtime}` }, runtime);
}

export function agentsView(app) {
  let onlyLive = true;
  let limit = PAGE;
  const liveBtn = h('button', { class: 'seg on', type: 'button', onclick: () => setLive(true) }, 'Live');
  const allBtn = h('button', { class: 'seg', type: 'button', onclick: () => setLive(false) }, 'All');
  const more = h('button', { class: 'more', type: 'button', hidden: true, onclick: () => grow() }, 'Show more');

  function setLive(v) {
    onlyLive = v;
    liveBtn.classList.toggle('on', v);
    allBtn.classList.toggle('on', !v);
    limit = PAGE;
    app.refresh('agents');
  }
  function grow() {
    limit = Math.min(limit + PAGE, MAX);
    app.refresh('agents');
  }

  return {
    name: 'agents',
    title: 'Agents',
    triggers: ['AgentRegistered', 'AgentHeartbeat', 'AgentEnded', 'LeaseGranted', 'LeaseReleased'],
    dependsOn: ['leases', 'waits', 'claims'], // the leases each agent holds, the line it waits in, its files
    tools: h('div', { class: 'segmented' }, liveBtn, allBtn),
    footer: more,
    async load(ctx) {
      return ctx.get('/v1/agents', { live: onlyLive ? 'true' : undefined, limit }, { pit: true });
    },
    render(body, ctx, panel) {
      const agents = body.agents;
      panel.setCount(`${countLabel(agents.length, limit)} ${onlyLive ? 'live' : 'sessions'}`);
      more.hidden = agents.length < limit || limit >= MAX;
      if (!agents.length) return h('p', { class: 'empty' }, onlyLive ? 'No live agents.' : 'No sessions yet.');
      const leases = ctx.shared.leasesBySession || new Map();
      const waiting = ctx.asOf === null ? ctx.shared.waitsBySession || new Map() : new Map(); // waits: present only
      const editing = filesBySession(ctx.shared.fileClaims);
      return h('table', { class: 'grid' },
        h('thead', {}, h('tr', {},
          h('th', { class: 'c-dot' }, ''), h('th', {}, 'Actor'), h('th', {}, 'Working on'),
          h('th', {}, 'Host'), h('th', { class: 'num' }, 'Last sign of life'), h('th', {}, 'Session'))),
        h('tbody', {}, agents.map((a) => {
          const state = a.ended_at ? 'ended' : a.live ? 'live' : 'stale';
          const held = leases.get(a.session_id) || [];
          const work = [];
          if (a.working_on) work.push(h('span', { class: 'chip chip-declared', title: 'declared working_on' }, a.working_on));
          for (const l of held) if (l.issue !== a.working_on) work.push(h('span', { class: 'chip chip-lease', title: `lease, fencing token ${l.fencing_token}` }, l.issue));
          const w = waiting.get(a.session_id);
          if (w) work.push(h('span', { class: 'chip chip-wait', title: `waiting (${w.kind}), place ${w.place}` }, `waits ${w.key} · ${w.place}`));
          const files = editing.get(a.session_id) || [];
          for (const c of files.slice(0, FILES_SHOWN)) work.push(h('span', { class: 'chip chip-file', dataset: { path: c.path }, title: `editing: claimed for ${c.issue}` }, c.path));
          if (files.length > FILES_SHOWN) work.push(h('span', { class: 'muted', title: files.slice(FILES_SHOWN).map((c) => c.path).join('\n') }, `+${files.length - FILES_SHOWN} files`));
          return h('tr', { class: `agent agent-${state}`, dataset: { session: a.session_id }, title: 'details', onclick: () => app.showAgent(a.session_id) },
            h('td', { class: 'c-dot' }, dot(state, state)),
            h('td', {}, a.runtime ? [harnessBadge(a.runtime), ' '] : null, // first: a long actor key is cut at the end
              h('span', { class: 'actor', title: a.actor_key }, a.actor_key),
              a.kind === 'human' ? badge('human', 'human') : null,
              a.stable ? null : h('span', { class: 'badge badge-unstable', title: `identity: ${a.identity_source}` }, 'unstable')),
            h('td', { class: 'work' }, work.length ? work : h('span', { class: 'muted' }, 'idle')),
            h('td', { class: 'muted' }, a.host || '—'),
            h('td', { class: 'num' }, agoSpan(a.last_heartbeat_at)),
            h('td', {}, shortId(a.session_id)));
        })));
    },
  };
}
