// Small DOM helpers. Every piece of server text goes in through textContent (h's string
// children), never through innerHTML: paths, actors and message bodies are untrusted.

/** Build an element: h('td', {class: 'x', title: 't', onclick: fn}, 'text', child, ...). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'style' && typeof value === 'object') {
      for (const [prop, v] of Object.entries(value)) {
        if (prop.startsWith('--')) el.style.setProperty(prop, String(v));
        else el.style[prop] = v;
      }
    }
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const $ = (selector, root = document) => root.querySelector(selector);

/** "12s", "4m", "3h", "2d": how long ago `iso` was, seen from `nowMs`. */
export function ago(iso, nowMs) {
  if (!iso) return '—';
  const s = Math.max(0, Math.round((nowMs - Date.parse(iso)) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

/** A span whose "… ago" text the page's clock keeps current (see tickClocks). */
export function agoSpan(iso) {
  return h('span', { class: 'ago', dataset: { ts: iso || '' }, title: iso || '' }, '');
}

/** A span whose "in …" text (time left until `iso`, or "expired") the page's clock keeps current. */
export function untilSpan(iso) {
  return h('span', { class: 'until', dataset: { ts: iso || '' }, title: iso || '' }, '');
}

/** "in 25s" while `iso` is ahead of `nowMs`, "expired" once it is not. */
export function left(iso, nowMs) {
  if (!iso) return '—';
  const ms = Date.parse(iso) - nowMs;
  return ms > 0 ? `in ${ago(new Date(nowMs - ms).toISOString(), nowMs)}` : 'expired';
}

/** Refresh every agoSpan and untilSpan against `nowMs` (the present, or the moment time travel shows). */
export function tickClocks(nowMs, root = document) {
  for (const el of root.querySelectorAll('.ago')) el.textContent = ago(el.dataset.ts, nowMs);
  for (const el of root.querySelectorAll('.until')) el.textContent = left(el.dataset.ts, nowMs);
}

export function clock(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
}

export function dateTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return `${d.toLocaleDateString([], { month: 'short', day: 'numeric' })} ${clock(iso)}`;
}

export const num = (n) => Number(n).toLocaleString('en-US');

/** "s-01J…" → "s-01J…4f2a": long ids cut in the middle, the whole id in the tooltip. */
export function shortId(id, keep = 6) {
  if (!id) return h('span', { class: 'muted' }, '—');
  const text = id.length > keep * 2 + 1 ? `${id.slice(0, keep)}…${id.slice(-keep)}` : id;
  return h('span', { class: 'mono id', title: id }, text);
}

export function dot(kind, title) {
  return h('span', { class: `dot dot-${kind}`, title, 'aria-label': title, role: 'img' });
}

export function badge(text, kind) {
  return h('span', { class: `badge badge-${kind || text}` }, text);
}

export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/** A count that may be a lower bound: `n` rows came back for a page of `limit`. */
export function countLabel(n, limit) {
  return n >= limit ? `${num(limit)}+` : num(n);
}
