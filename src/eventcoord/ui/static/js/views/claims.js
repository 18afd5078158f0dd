// File claims as a tree. Each folder is read lazily: GET /v1/file-claims?prefix=&limit=
// returns the claims at or below it (bounded), grouped here by their next path segment.
// A folder whose page came back full shows "N+": the count is a lower bound.
import { agoSpan, countLabel, dot, h } from '../dom.js';

const LIMIT = 500;
const MAX_OPEN = 24;

/** Group claims under `prefix` into {dirs: Map(name → [claims]), leaves: [claims]}. */
export function group(claims, prefix) {
  const dirs = new Map();
  const leaves = [];
  for (const c of claims) {
    let rel = prefix ? c.path.slice(prefix.length) : c.path;
    rel = rel.replace(/^\/+/, '');
    const segs = rel.split('/').filter(Boolean);
    if (segs.length >= 2) {
      if (!dirs.has(segs[0])) dirs.set(segs[0], []);
      dirs.get(segs[0]).push(c);
    } else {
      leaves.push({ ...c, name: rel || c.path });
    }
  }
  return { dirs, leaves };
}

export function claimsView(app) {
  const open = new Map(); // prefix → body of its page (null until loaded)

  function toggle(prefix) {
    if (open.has(prefix)) {
      for (const p of [...open.keys()]) if (p === prefix || p.startsWith(`${prefix}/`)) open.delete(p);
    } else {
      if (open.size >= MAX_OPEN) open.delete(open.keys().next().value);
      open.set(prefix, null);
    }
    app.refresh('claims');
  }

  function claimRow(c, depth) {
    const state = c.live ? 'live' : 'stale';
    return h('li', { class: 'leaf', style: { '--depth': depth }, dataset: { path: c.path } },
      dot(state, c.live ? 'holder live' : 'holder stale (reclaimable)'),
      h('span', { class: 'mono path', title: c.path }, c.name),
      c.exclusive ? null : h('span', { class: 'badge badge-shared' }, 'shared'),
      h('span', { class: 'issue' }, c.issue),
      h('span', { class: 'actor muted', title: c.session_id || 'no session: held until forced' }, c.actor_key || '—'),
      h('span', { class: 'right' }, agoSpan(c.claimed_at)));
  }

  function renderLevel(body, prefix, depth) {
    const { dirs, leaves } = group(body.file_claims, prefix);
    const full = body.file_claims.length >= LIMIT;
    const items = [];
    for (const [name, members] of [...dirs.entries()].sort((a, b) => b[1].length - a[1].length || a[0].localeCompare(b[0]))) {
      const path = prefix ? `${prefix}/${name}` : name;
      const isOpen = open.has(path);
      const stale = members.some((c) => !c.live);
      items.push(h('li', { class: `dir${isOpen ? ' open' : ''}`, style: { '--depth': depth }, dataset: { prefix: path } },
        h('button', { type: 'button', class: 'twisty', 'aria-expanded': String(isOpen), onclick: () => toggle(path) },
          h('span', { class: 'caret' }, isOpen ? '▾' : '▸'),
          h('span', { class: 'mono path' }, `${name}/`)),
        stale ? dot('stale', 'some holders are stale') : null,
        h('span', { class: 'right count' }, full ? `${members.length}+` : String(members.length))));
      const child = open.get(path);
      if (isOpen && child) items.push(...renderLevel(child, path, depth + 1));
      else if (isOpen) items.push(h('li', { class: 'loading', style: { '--depth': depth + 1 } }, 'loading…'));
    }
    for (const c of leaves.sort((a, b) => a.name.localeCompare(b.name))) items.push(claimRow(c, depth));
    if (full) items.push(h('li', { class: 'note', style: { '--depth': depth } }, `first ${LIMIT} claims under ${prefix || 'the root'} shown`));
    return items;
  }

  return {
    name: 'claims',
    title: 'File claims',
    triggers: ['FilesClaimed', 'FileClaimReleased', 'AgentEnded', 'AgentHeartbeat'],
    async load(ctx) {
      const prefixes = ['', ...open.keys()];
      const pages = await Promise.all(prefixes.map((prefix) =>
        ctx.get('/v1/file-claims', { prefix: prefix || undefined, limit: LIMIT }, { pit: true })
          .catch((err) => (prefix ? { file_claims: [], error: err } : Promise.reject(err)))));
      return { prefixes, pages };
    },
    render(data, ctx, panel) {
      data.prefixes.forEach((p, i) => { if (p) open.set(p, data.pages[i]); });
      const root = data.pages[0];
      ctx.shared.fileClaims = root.file_claims; // the waits view's holders of path lines
      panel.setCount(`${countLabel(root.file_claims.length, LIMIT)} claimed`);
      if (!root.file_claims.length) return h('p', { class: 'empty' }, 'No file is claimed.');
      return h('ul', { class: 'tree' }, renderLevel(root, '', 0));
    },
  };
}
