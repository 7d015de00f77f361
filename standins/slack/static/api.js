// The stand-in's same-origin routes, and the live change stream.

async function getJSON(path, params = {}) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) query.set(k, v);
  const qs = query.toString();
  const res = await fetch(qs ? `${path}?${qs}` : path, {
    headers: { Accept: 'application/json' },
    cache: 'no-store',
  });
  if (!res.ok) throw Object.assign(new Error(`${path}: HTTP ${res.status}`), { status: res.status });
  return res.json();
}

/** POST JSON; always resolves to {ok: true, ...} or {ok: false, error}. */
async function post(path, body) {
  let res;
  try {
    res = await fetch(path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify(body),
    });
  } catch {
    return { ok: false, error: 'The stand-in did not answer (is it still running?)' };
  }
  let data = null;
  try {
    data = await res.json();
  } catch {
    data = null;
  }
  if (data && typeof data.ok === 'boolean') return data;
  return { ok: false, error: `The stand-in answered HTTP ${res.status}` };
}

export const api = {
  workspace: () => getJSON('/ui/api/workspace'),
  history: (channel, user) => getJSON('/ui/api/history', { channel, user }),
  replies: (channel, ts, user) => getJSON('/ui/api/replies', { channel, ts, user }),
  home: (user) => getJSON('/ui/api/home', { user }),
  modals: (user) => getJSON('/ui/api/modals', { user }),
  emoji: () => getJSON('/ui/api/emoji'),
  demo: () => getJSON('/ui/api/demo'),
  command: (user, channel, text) => post('/ui/api/command', { user, channel, text }),
  click: (user, channel, ts, e) =>
    post('/ui/api/click', { user, channel, ts, action_id: e.action_id, value: e.value }),
  viewClick: (user, viewId, e) =>
    post('/ui/api/view_click', { user, view_id: viewId, action_id: e.action_id, value: e.value }),
  viewSubmit: (user, viewId, values) => post('/ui/api/view_submit', { user, view_id: viewId, values }),
  viewClose: (user, viewId) => post('/ui/api/view_close', { user, view_id: viewId }),
  homeOpened: (user) => post('/ui/api/home_opened', { user }),
  demoFail: (start, end) => post('/ui/api/demo/fail', { start, end }),
  demoRecover: () => post('/ui/api/demo/recover', {}),
  demoClock: (hours) => post('/ui/api/demo/clock', { hours }),
};

/**
 * Listen to /ui/api/stream. `onChange(kinds)` gets the Set of change kinds seen since its last
 * call ("reconnect" after (re)connecting); calls are coalesced: at most one every `gap` ms and
 * never two at once. `onStatus(true|false)` follows the connection. Returns {kick} to ask for a
 * refresh without an event (after our own POSTs, in case the stream is down).
 */
export function connectLive({ onChange, onStatus, gap = 150 }) {
  let pending = new Set();
  let timer = null;
  let running = false;
  let last = 0;

  async function flush() {
    timer = null;
    running = true;
    last = Date.now();
    const kinds = pending;
    pending = new Set();
    try {
      await onChange(kinds);
    } catch (err) {
      console.error('refresh failed', err);
    }
    running = false;
    if (pending.size) schedule();
  }

  function schedule() {
    if (timer || running) return;
    timer = setTimeout(flush, Math.max(0, last + gap - Date.now()));
  }

  function note(kind) {
    pending.add(kind);
    schedule();
  }

  function open() {
    const source = new EventSource('/ui/api/stream');
    source.addEventListener('open', () => {
      onStatus(true);
      note('reconnect');
    });
    source.addEventListener('change', (ev) => {
      let data = {};
      try {
        data = JSON.parse(ev.data) || {};
      } catch {
        data = {};
      }
      note(typeof data.kind === 'string' ? data.kind : 'any');
    });
    source.addEventListener('error', () => {
      onStatus(false);
      // EventSource retries by itself unless the server refused it outright (CLOSED).
      if (source.readyState === EventSource.CLOSED) setTimeout(open, 2000);
    });
  }

  open();
  return { kick: () => note('kick') };
}
