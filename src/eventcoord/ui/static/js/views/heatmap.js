// The code heatmap drawn as a treemap: GET /v1/heatmap?mode=&since=&prefix=&depth=&limit=.
// Each tile is a path prefix, its area and colour the count (claims = work, contention =
// collisions). Click a folder tile to drill down (prefix = it, depth + 1); the breadcrumb
// goes back up.
import { h, fill, num } from '../dom.js';
import { squarify } from '../treemap.js';

const WINDOWS = [
  ['15m', 15 * 60e3], ['1h', 3600e3], ['6h', 6 * 3600e3], ['24h', 86400e3], ['7d', 7 * 86400e3], ['all', null],
];
const LIMIT = 150;
const PALETTE = {
  claims: [[22, 42, 74], [37, 99, 235], [125, 211, 252]],
  // Dim ochre (rarely contended) through orange to a saturated red: the hottest folder is the reddest.
  contention: [[96, 80, 48], [224, 100, 24], [232, 22, 34]],
};

function mix(a, b, t) {
  return a.map((v, i) => Math.round(v + (b[i] - v) * t));
}

/** Colour of intensity t in [0, 1] on the mode's three-stop ramp. */
export function heat(mode, t) {
  const [lo, mid, hi] = PALETTE[mode];
  const c = t < 0.5 ? mix(lo, mid, t * 2) : mix(mid, hi, (t - 0.5) * 2);
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

const isPattern = (p) => /[*?[\]\\]/.test(p);

export function heatmapView(app) {
  let mode = 'contention';
  let windowMs = 86400e3;
  let prefix = '';
  let last = null;

  const modeBtns = ['claims', 'contention'].map((m) =>
    h('button', { type: 'button', class: `seg${m === mode ? ' on' : ''}`, dataset: { mode: m }, onclick: () => setMode(m) }, m === 'claims' ? 'Claims' : 'Contention'));
  const windowSel = h('select', { class: 'window', 'aria-label': 'time window', onchange: (e) => { windowMs = WINDOWS.find((w) => w[0] === e.target.value)[1]; app.refresh('heatmap'); } },
    WINDOWS.map(([label, ms]) => h('option', { value: label, selected: ms === windowMs }, label === 'all' ? 'all time' : `last ${label}`)));
  const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'heatmap path' });
  const stage = h('div', { class: 'treemap', role: 'list' });
  const legend = h('div', { class: 'legend' });

  function setMode(m) {
    mode = m;
    for (const b of modeBtns) b.classList.toggle('on', b.dataset.mode === m);
    app.refresh('heatmap');
  }
  function go(p) {
    prefix = p;
    app.refresh('heatmap');
  }

  function drawCrumbs() {
    const parts = prefix ? prefix.split('/') : [];
    fill(crumbs, h('button', { type: 'button', class: 'crumb', onclick: () => go('') }, 'root'),
      parts.map((seg, i) => [h('span', { class: 'sep' }, '/'),
        h('button', { type: 'button', class: 'crumb', onclick: () => go(parts.slice(0, i + 1).join('/')) }, seg)]));
  }

  function draw() {
    drawCrumbs();
    if (!last) return;
    const buckets = last.buckets;
    const width = stage.clientWidth || 600;
    const height = stage.clientHeight || 300;
    if (!buckets.length) {
      fill(stage, h('p', { class: 'empty' }, `No ${mode === 'claims' ? 'claims' : 'contention'} in this window${prefix ? ` under ${prefix}/` : ''}.`));
      fill(legend);
      return;
    }
    const max = Math.max(...buckets.map((b) => b.count));
    const depth = last.depth;
    const tiles = squarify(buckets.map((b) => ({ ...b, value: b.count })), 0, 0, width, height).map(({ item, x, y, w, h: ht }) => {
      const t = max > 1 ? Math.log1p(item.count) / Math.log1p(max) : 1;
      const segs = item.prefix.split('/');
      // `leaf`: the server saw nothing below it (a file such as README.md at the root).
      const leaf = item.leaf === true || segs.length < depth || isPattern(item.prefix) || item.prefix === prefix;
      const label = prefix && item.prefix.startsWith(`${prefix}/`) ? item.prefix.slice(prefix.length + 1) : item.prefix;
      const tile = h(leaf ? 'div' : 'button', {
        class: `tile${leaf ? ' leaf' : ''}${w < 60 || ht < 34 ? ' tiny' : ''}`,
        type: leaf ? undefined : 'button',
        role: 'listitem',
        title: `${item.prefix}: ${num(item.count)} ${mode === 'claims' ? 'claims' : 'conflicts'}${leaf ? '' : ' — click to drill down'}`,
        dataset: { prefix: item.prefix, count: item.count },
        style: { left: `${x}px`, top: `${y}px`, width: `${Math.max(0, w - 2)}px`, height: `${Math.max(0, ht - 2)}px`, background: heat(mode, t), color: t > 0.72 && mode === 'claims' ? '#0b1220' : '#fff7ed' },
        onclick: leaf ? undefined : () => go(item.prefix),
      }, h('span', { class: 'name' }, leaf ? label : `${label}/`), h('span', { class: 'n' }, num(item.count)));
      return tile;
    });
    fill(stage, tiles);
    fill(legend, h('span', {}, '1'), h('span', { class: `ramp ramp-${mode}` }), h('span', {}, num(max)),
      h('span', { class: 'muted' }, ` ${mode === 'claims' ? 'claims' : 'conflicts'} per ${depth === 1 ? 'top folder' : 'path'}`));
  }

  new ResizeObserver(() => draw()).observe(stage);

  return {
    name: 'heatmap',
    title: 'Heatmap',
    triggers: ['FilesClaimed', 'ClaimConflict'],
    tools: h('div', { class: 'tools-row' }, h('div', { class: 'segmented' }, modeBtns), windowSel),
    wide: true,
    async load(ctx) {
      const anchor = ctx.nowMs();
      const since = windowMs === null ? undefined : new Date(anchor - windowMs).toISOString();
      const depth = prefix ? prefix.split('/').length + 1 : 1;
      return ctx.get('/v1/heatmap', { mode, since, prefix: prefix || undefined, depth, limit: LIMIT }, { pit: true });
    },
    render(body, ctx, panel) {
      last = body;
      const total = body.buckets.reduce((s, b) => s + b.count, 0);
      panel.setCount(`${num(total)} ${mode === 'claims' ? 'claims' : 'conflicts'}${body.buckets.length >= LIMIT ? ` in the top ${LIMIT}` : ''}`);
      const view = h('div', { class: 'heatmap' }, crumbs, stage, legend);
      requestAnimationFrame(draw);
      draw();
      return view;
    },
  };
}
