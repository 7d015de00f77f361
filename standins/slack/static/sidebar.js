// The sidebar: Channels, Direct messages, Apps -> backfill-bot (App Home).
import { el } from './dom.js';

export function hashFor(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  return `#${q.toString()}`;
}

export function createSidebar(app) {
  const nav = document.getElementById('sidebar');
  let sig = null;

  function link(attrs, text) {
    return el('li', {}, el('a', { class: 'conversation', ...attrs }, text));
  }

  function build() {
    const { ws, state } = app;
    const byName = (a, b) => a.label.localeCompare(b.label);
    const rows = ws.channels.map((c) => ({
      c,
      label: c.is_dm ? (app.lookups.user(c.dm_user) || { name: c.name }).name : `# ${c.name}`,
    }));
    const channels = rows.filter((r) => !r.c.is_dm).sort(byName);
    const dms = rows.filter((r) => r.c.is_dm).sort(byName);
    const convo = ({ c, label }) => link({
      href: hashFor({ channel: c.id, user: state.user }),
      'data-channel': c.id,
      title: c.is_dm ? `Direct messages between ${ws.bot.name} and ${label}`
        : c.is_private ? 'Private channel' : null,
    }, label);
    nav.replaceChildren(
      el('div', { class: 'team' }, ws.team.name),
      el('h2', {}, 'Channels'),
      el('ul', {}, channels.map(convo)),
      el('h2', {}, 'Direct messages'),
      el('ul', {}, dms.length ? dms.map(convo) : el('li', { class: 'none' }, 'none yet')),
      el('h2', {}, 'Apps'),
      el('ul', {}, link({ href: hashFor({ home: '1', user: state.user }), 'data-home': '1' }, ws.bot.name)));
  }

  /** Rebuild only when the list changed, else just move the highlight (keeps keyboard focus). */
  function render() {
    const next = `${app.renderKey} ${app.state.user}`;
    if (next !== sig) {
      sig = next;
      build();
    }
    for (const a of nav.querySelectorAll('a.conversation')) {
      const active = app.state.home ? a.dataset.home === '1' : a.dataset.channel === app.state.channel;
      a.classList.toggle('active', active);
      if (active) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
  }

  return { render };
}
