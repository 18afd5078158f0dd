// Time travel: a slider over the log's positions. At the right end the board is live;
// anywhere else every view is read "as of" that position (`as_of`, docs/protocol.md#history).
import { dateTime, debounce, h, num } from './dom.js';

export function timeline(app) {
  let head = 0;
  let first = 1;
  let firstAt = null;
  const range = h('input', { type: 'range', id: 'timeline-range', min: 1, max: 1, value: 1, step: 1, 'aria-label': 'moment in the log' });
  const pos = h('input', { type: 'number', id: 'timeline-position', min: 1, value: 1, 'aria-label': 'position', title: 'jump to a position' });
  const when = h('span', { class: 'when', id: 'timeline-when' }, 'live');
  const startLabel = h('span', { class: 'edge muted' }, '');
  const liveBtn = h('button', { type: 'button', class: 'live-btn', id: 'timeline-live', hidden: true, onclick: () => app.travel(null) }, 'Back to live');
  const step = (d) => {
    const current = app.state.asOf === null ? head : app.state.asOf;
    app.travel(Math.min(head, Math.max(first, current + d)));
  };
  const back = h('button', { type: 'button', class: 'step', title: 'one position back', onclick: () => step(-1) }, '◀');
  const fwd = h('button', { type: 'button', class: 'step', title: 'one position forward', onclick: () => step(1) }, '▶');

  const go = debounce((value) => app.travel(value >= head ? null : value), 180);
  range.addEventListener('input', () => {
    pos.value = range.value;
    when.textContent = Number(range.value) >= head ? 'live' : '…';
    go(Number(range.value));
  });
  pos.addEventListener('change', () => {
    const v = Math.round(Number(pos.value));
    if (Number.isFinite(v) && v >= 1) app.travel(v >= head ? null : v);
  });

  const el = h('div', { class: 'timeline', role: 'group', 'aria-label': 'time travel' },
    h('span', { class: 'label' }, 'History'), startLabel, back, range, fwd,
    h('span', { class: 'at' }, '#', pos), when, liveBtn);

  return {
    el,
    setStart(position, at) {
      first = Math.max(1, position || 1);
      firstAt = at;
      range.min = String(first);
      startLabel.textContent = firstAt ? dateTime(firstAt) : '';
    },
    setHead(value) {
      head = value;
      range.max = String(Math.max(head, first));
      if (app.state.asOf === null) {
        range.value = String(head);
        pos.value = String(head);
        when.textContent = `live · head ${num(head)}`;
      }
    },
    show(state) {
      const travelling = state.asOf !== null;
      liveBtn.hidden = !travelling;
      if (travelling) {
        range.value = String(state.asOf);
        pos.value = String(state.asOf);
        when.textContent = state.at ? `as of ${dateTime(state.at)}` : 'as of …';
      } else {
        this.setHead(head);
      }
    },
  };
}
