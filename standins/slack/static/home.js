// The App Home tab: section#home, the view the bot published for the acting user.
import { el } from './dom.js';
import { renderBlocks } from './blocks.js';

export function createHome(app) {
  const pane = document.getElementById('home');
  const body = el('div', { class: 'home-body' });
  const status = el('p', { class: 'field-error', role: 'alert' });
  pane.append(
    el('header', { class: 'pane-head' }, el('h1', {}, 'backfill-bot'), el('span', { class: 'tab' }, 'Home')),
    status,
    body);
  let gen = 0;
  let sig = null;

  async function onAction(viewId, e) {
    status.textContent = '';
    const r = await app.api.viewClick(app.state.user, viewId, e);
    if (!r.ok) status.textContent = r.error || 'That did not work.';
    app.kick();
  }

  function render(view) {
    if (!view) {
      body.replaceChildren(el('p', { class: 'empty' }, 'The app has not published a Home tab yet.'));
      return;
    }
    body.replaceChildren(renderBlocks(view.blocks, {
      lookups: app.lookups,
      onAction: (e) => onAction(view.id, e),
    }));
  }

  async function refresh() {
    const mine = ++gen;
    let answer;
    try {
      answer = await app.api.home(app.state.user);
    } catch (err) {
      console.warn(err);
      return;
    }
    if (mine !== gen) return;
    const view = (answer && answer.view) || null;
    const next = `${app.renderKey}${JSON.stringify(view)}`;
    if (next === sig) return;
    sig = next;
    render(view);
  }

  /** The user opened the tab (or is someone else now): tell the bot, then show what it has. */
  async function open() {
    status.textContent = '';
    sig = null;
    refresh(); // show what is published now; the bot may publish anew when told
    const r = await app.api.homeOpened(app.state.user);
    if (!r.ok) status.textContent = r.error || 'The app could not be told that Home was opened.';
    await refresh();
  }

  return { refresh, open };
}
