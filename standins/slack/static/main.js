// Wires the page together. The URL hash (#channel=…&user=…[&thread=…] or #home=1&user=…) is the
// selection, so a reload shows the same thing.
import { api, connectLive } from './api.js';
import { compareTs, el } from './dom.js';
import { loadEmoji } from './emoji.js';
import { createComposer } from './composer.js';
import { createConversation } from './conversation.js';
import { createThread } from './thread.js';
import { createModal } from './modal.js';
import { createHome } from './home.js';
import { createSidebar, hashFor } from './sidebar.js';
import { createSwitcher } from './switcher.js';
import { createControls } from './controls.js';

const local = new Map(); // "user channel" -> [{kind: 'local', ts, text}]: lines only this page shows

const app = {
  api,
  ws: null,
  lookups: null,
  renderKey: 0, // bumped when names or the acting user change: every row re-renders
  state: { user: null, channel: null, home: false, thread: null },
  kick: () => {},
  localErrors: (channel) => local.get(`${app.state.user} ${channel}`) || [],
  localError(channel, text) {
    const ts = (Date.now() / 1000).toFixed(6);
    const key = `${app.state.user} ${channel}`;
    const rows = local.get(key) || [];
    local.set(key, [...rows, { kind: 'local', ts, text: String(text) }].sort((a, b) => compareTs(a.ts, b.ts)));
    if (channel === app.state.channel) parts.conversation.refresh();
  },
  /** Change the selection through the hash; `replace` leaves no history entry (a gone thread). */
  navigate(patch, { replace = false } = {}) {
    const next = { ...app.state, ...patch };
    if ('channel' in patch || 'home' in patch) next.thread = patch.thread ?? null;
    if ('channel' in patch) next.home = false;
    if (!replace) location.hash = stateHash(next);
    else {
      history.replaceState(null, '', stateHash(next));
      apply();
    }
  },
};

function stateHash(s) {
  return s.home ? hashFor({ home: '1', user: s.user })
    : hashFor({ channel: s.channel, user: s.user, thread: s.thread });
}

function buildLookups() {
  const index = (rows) => new Map(rows.map((r) => [r.id, r]));
  const users = index(app.ws.users || []);
  const channels = index(app.ws.channels || []);
  const groups = index(app.ws.usergroups || []);
  app.lookups = {
    user: (id) => users.get(id) || null,
    channel: (id) => channels.get(id) || null,
    group: (id) => groups.get(id) || null,
    me: app.state.user,
    permalink: (href) => permalink(href, channels),
  };
  app.renderKey += 1;
}

let parts = null;

/** A Slack permalink to a message of this workspace -> the page's own hash (its thread), else null. */
function permalink(href, channels) {
  const url = new URL(href);
  const m = /^\/archives\/([A-Z0-9]+)\/p(\d{10})(\d{6})$/.exec(url.pathname);
  if (!/^([a-z0-9-]+\.)?slack\.com$/.test(url.hostname) || !m || !channels.has(m[1])) return null;
  const thread = url.searchParams.get('thread_ts') || `${m[2]}.${m[3]}`;
  return stateHash({ channel: m[1], user: app.state.user, thread });
}

function renderChrome() {
  document.getElementById('channel').hidden = app.state.home;
  document.getElementById('home').hidden = !app.state.home;
  parts.sidebar.render();
  parts.switcher.render();
  parts.conversation.header();
  parts.composer.defaultHint();
}

/** Apply the hash: fix what is missing or unknown, then load what changed. */
function apply() {
  const h = new URLSearchParams(location.hash.slice(1));
  const prev = app.state;
  const user = app.lookups.user(h.get('user')) ? h.get('user') : prev.user || app.ws.default_user;
  const channel = app.lookups.channel(h.get('channel')) ? h.get('channel')
    : prev.channel || app.ws.default_channel;
  const home = h.get('home') === '1';
  const next = { user, channel, home, thread: home ? null : h.get('thread') };
  app.state = next;
  if (location.hash !== stateHash(next)) history.replaceState(null, '', stateHash(next));
  const userChanged = user !== prev.user;
  if (userChanged) buildLookups();
  renderChrome();
  if (home && (userChanged || !prev.home)) parts.home.open();
  if (!home && (userChanged || channel !== prev.channel || prev.home)) parts.conversation.refresh();
  if (userChanged || next.thread !== prev.thread || channel !== prev.channel || home !== prev.home) {
    parts.thread.refresh();
  }
  if (userChanged) parts.modal.refresh();
}

async function reloadWorkspace() {
  const ws = await api.workspace();
  if (JSON.stringify(ws) === JSON.stringify(app.ws)) return;
  app.ws = ws;
  buildLookups();
  renderChrome();
}

async function refreshAll(kinds) {
  if (kinds.has('channel') || kinds.has('reconnect') || kinds.has('any')) {
    try {
      await reloadWorkspace();
    } catch (err) {
      console.warn(err);
    }
  }
  const jobs = [parts.modal.refresh(), parts.thread.refresh(), parts.controls.refresh()];
  jobs.push(app.state.home ? parts.home.refresh() : parts.conversation.refresh());
  await Promise.allSettled(jobs);
}

function setLive(up) {
  const dot = document.getElementById('live');
  dot.textContent = up ? 'live' : 'reconnecting…';
  dot.className = up ? 'up' : 'down';
}

async function boot() {
  let ws = null;
  while (!ws) {
    try {
      [ws] = await Promise.all([api.workspace(), loadEmoji()]);
    } catch (err) {
      console.warn(err);
      document.getElementById('messages').replaceChildren(
        el('p', { class: 'empty' }, 'The stand-in is not answering; trying again…'));
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
  app.ws = ws;
  buildLookups();
  const composer = createComposer(app);
  parts = {
    composer,
    conversation: createConversation(app, composer),
    thread: createThread(app),
    modal: createModal(app),
    home: createHome(app),
    sidebar: createSidebar(app),
    switcher: createSwitcher(app),
    controls: createControls(app),
  };
  apply();
  parts.controls.refresh();
  window.addEventListener('hashchange', apply);
  const live = connectLive({ onChange: refreshAll, onStatus: setLive });
  app.kick = live.kick;
}

boot();
