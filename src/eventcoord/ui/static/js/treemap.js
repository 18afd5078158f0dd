// Squarified treemap (Bruls, Huizing, van Wijk 2000): lays out weighted items in a
// rectangle so each tile's area is proportional to its weight and tiles stay near-square.

function worst(row, side) {
  let sum = 0;
  let max = 0;
  let min = Infinity;
  for (const a of row) {
    sum += a;
    if (a > max) max = a;
    if (a < min) min = a;
  }
  const s2 = sum * sum;
  const w2 = side * side;
  return Math.max((w2 * max) / s2, s2 / (w2 * min));
}

/**
 * items: [{value, ...}] (value > 0). Returns [{item, x, y, w, h}] filling
 * (x, y, width, height), largest first.
 */
export function squarify(items, x, y, width, height) {
  const sorted = items.filter((it) => it.value > 0).sort((a, b) => b.value - a.value);
  const total = sorted.reduce((s, it) => s + it.value, 0);
  if (!total || width <= 0 || height <= 0) return [];
  const scale = (width * height) / total;
  const areas = sorted.map((it) => it.value * scale);
  const out = [];
  let rect = { x, y, w: width, h: height };
  let row = [];
  let start = 0;

  const place = () => {
    const sum = row.reduce((s, a) => s + a, 0);
    if (rect.w >= rect.h) {
      const colW = sum / rect.h;
      let cy = rect.y;
      row.forEach((a, i) => {
        const hgt = a / colW;
        out.push({ item: sorted[start + i], x: rect.x, y: cy, w: colW, h: hgt });
        cy += hgt;
      });
      rect = { x: rect.x + colW, y: rect.y, w: rect.w - colW, h: rect.h };
    } else {
      const rowH = sum / rect.w;
      let cx = rect.x;
      row.forEach((a, i) => {
        const wid = a / rowH;
        out.push({ item: sorted[start + i], x: cx, y: rect.y, w: wid, h: rowH });
        cx += wid;
      });
      rect = { x: rect.x, y: rect.y + rowH, w: rect.w, h: rect.h - rowH };
    }
    start += row.length;
    row = [];
  };

  for (let i = 0; i < areas.length; i++) {
    const side = Math.min(rect.w, rect.h);
    if (row.length === 0 || worst([...row, areas[i]], side) <= worst(row, side)) {
      row.push(areas[i]);
    } else {
      place();
      i -= 1;
    }
  }
  if (row.length) place();
  return out;
}
