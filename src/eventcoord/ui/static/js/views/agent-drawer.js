// One agent in depth, in a drawer: GET /v1/agents/{session_id} (the session, every lease it
// was granted, its work items, named leases), the files it is editing (GET
// /v1/file-claims?session_id=) and its channel agent:<session_id> (GET /v1/messages, the
// last page). Opened by clicking an agent row.
import { agoSpan, badge, clock, dateTime, dot, fill, h, tickClocks } from '../dom.js';
import * as api from '../api.js';

export function agentDrawer() {
  const body = h('div', { class: 'drawer-body' });
  const close = h('button', { type: 'button', class: 'ghost', onclick: () => hide() }, 'Close');
  const el = h('aside', { class: 'drawer', id: 'agent-drawer', hidden: true, 'aria-label': 'agent details' },
    h('header', {}, h('h2', {}, 'Agent'), close), body);
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape') hide(); });

  function hide() {
    el.hidden = true;
  }

  async function open(sessionId, travelling) {
    el.hidden = false;
    fill(body, h('p', { class: 'muted' }, 'loading…'));
    try {
      const [detail, inbox, files] = await Promise.all([
        api.get(`/v1/agents/${encodeURIComponent(sessionId)}`),
        api.get('/v1/messages', { channel: `agent:${sessionId}`, limit: 20 }).catch(() => ({ messages: [] })),
        api.get('/v1/file-claims', { session_id: sessionId, limit: 200 }).catch(() => ({ file_claims: [] })),
      ]);
      render(detail, inbox.messages, files.file_claims, travelling);
    } catch (err) {
      fill(body, h('p', { class: 'panel-error' }, `Could not read: ${err.message}`));
    }
  }

  function render({ agent: a, leases, work, named_leases: named }, messages, files, travelling) {
    const state = a.ended_at ? 'ended' : a.live ? 'live' : 'stale';
    fill(body,
      travelling ? h('p', { class: 'note' }, 'Details show the present, not the moment on the slider.') : null,
      h('div', { class: 'who' }, dot(state, state), h('strong', { class: 'actor' }, a.actor_key), a.kind === 'human' ? badge('human', 'human') : null),
      h('dl', { class: 'facts' },
        h('dt', {}, 'State'), h('dd', {}, state, a.ended_at ? ` since ${dateTime(a.ended_at)}` : ''),
        h('dt', {}, 'Last sign of life'), h('dd', {}, agoSpan(a.last_heartbeat_at), ' ago'),
        h('dt', {}, 'Working on'), h('dd', {}, a.working_on || '—'),
        h('dt', {}, 'Host'), h('dd', {}, a.host || '—'),
        h('dt', {}, 'Harness'), h('dd', { class: 'harness' }, a.runtime || '—'),
        h('dt', {}, 'Identity'), h('dd', {}, a.identity_source, a.stable ? '' : ' (unstable: advisory only)'),
        h('dt', {}, 'Registered'), h('dd', {}, dateTime(a.registered_at)),
        h('dt', {}, 'Session'), h('dd', { class: 'mono' }, a.session_id)),
      h('h3', {}, `Leases (${leases.length})`),
      leases.length ? h('ul', { class: 'plain' }, [...leases].reverse().map((l) => h('li', { class: 'lease-line', dataset: { issue: l.issue } },
        h('span', { class: 'issue' }, l.issue), h('span', { class: 'mono token' }, ` #${l.fencing_token}`),
        h('span', { class: 'muted' }, ` ${dateTime(l.granted_at)} → `),
        l.released_at ? h('span', { class: 'muted' }, `${l.release_reason} ${clock(l.released_at)}`) : badge('holding', 'held')))) : h('p', { class: 'muted' }, 'none'),
      h('h3', {}, `Files it is editing (${files.length})`),
      files.length ? h('ul', { class: 'plain' }, files.map((c) => h('li', { class: 'file-line', dataset: { path: c.path } },
        h('span', { class: 'mono path' }, c.path), ' ', h('span', { class: 'issue' }, c.issue)))) : h('p', { class: 'muted' }, 'none'),
      named.length ? [h('h3', {}, 'Named leases'), h('ul', { class: 'plain' }, named.map((n) => h('li', {}, h('span', { class: 'mono' }, n.name), ` #${n.fencing_token}`, n.expired ? h('span', { class: 'muted' }, ' expired') : null)))] : null,
      h('h3', {}, `Work (${work.length})`),
      work.length ? h('ul', { class: 'plain' }, work.map((w) => h('li', {}, h('span', { class: 'issue' }, w.issue || w.item_id), ' ', badge(w.status, w.status), w.outcome ? h('span', { class: 'muted' }, ` ${w.outcome}`) : null))) : h('p', { class: 'muted' }, 'none'),
      h('h3', {}, 'Messages to this agent'),
      messages.length ? h('ol', { class: 'feed messages' }, [...messages].reverse().map((m) => h('li', { class: 'message' },
        h('div', { class: 'line1' }, h('span', { class: 'time mono' }, clock(m.recorded_at)), h('span', { class: 'actor muted' }, m.actor_key || '')),
        h('div', { class: 'msg-body' }, m.body)))) : h('p', { class: 'muted' }, 'none'));
    tickClocks(Date.now(), body);
  }

  return { el, open, hide };
}
