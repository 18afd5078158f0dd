// Follows GET /v1/events/stream (Server-Sent Events) with fetch(), not EventSource:
// EventSource cannot send an Authorization header, and a token in the URL would land in
// access logs. The SSE framing is parsed here; after a drop (server restart, network) it
// reconnects by itself with Last-Event-ID = the last position seen, so nothing is missed.

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Parse one SSE block ("id: 7\nevent: X\ndata: {...}") into {id, event, data}. */
export function parseBlock(block) {
  const out = { id: null, event: 'message', data: [] };
  for (const line of block.split(/\r?\n/)) {
    if (!line || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') out.id = value;
    else if (field === 'event') out.event = value;
    else if (field === 'data') out.data.push(value);
  }
  return out.data.length ? { id: out.id, event: out.event, data: out.data.join('\n') } : null;
}

/**
 * Follow the log from `after`. Callbacks: onEvent(wireEvent), onStatus(state, detail)
 * with state 'connecting' | 'live' | 'disconnected' | 'unauthorized'.
 * Returns {stop()}.
 */
export function follow({ after, bearer, onEvent, onStatus }) {
  let last = after;
  let stopped = false;
  let controller = null;
  let delay = 250;

  async function once() {
    controller = new AbortController();
    const headers = { Authorization: `Bearer ${bearer()}`, Accept: 'text/event-stream' };
    if (last !== null && last !== undefined) headers['Last-Event-ID'] = String(last);
    const r = await fetch('/v1/events/stream', { headers, cache: 'no-store', signal: controller.signal });
    if (r.status === 401) return 'unauthorized';
    if (!r.ok || !r.body) throw new Error(`stream answered HTTP ${r.status}`);
    onStatus('live');
    delay = 250;
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the server closed the stream');
      buffer += value;
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, '');
        const msg = parseBlock(block);
        if (!msg) continue;
        let ev;
        try {
          ev = JSON.parse(msg.data);
        } catch {
          continue;
        }
        if (msg.id !== null) last = Number(msg.id);
        onEvent(ev);
      }
    }
  }

  (async () => {
    onStatus('connecting');
    while (!stopped) {
      try {
        if ((await once()) === 'unauthorized') {
          onStatus('unauthorized');
          return;
        }
      } catch (err) {
        if (stopped) return;
        onStatus('disconnected', { error: String(err && err.message ? err.message : err), retryMs: delay, last });
        await sleep(delay);
        delay = Math.min(delay * 2, 4000);
      }
    }
  })();

  return {
    stop() {
      stopped = true;
      if (controller) controller.abort();
    },
    get last() {
      return last;
    },
  };
}
