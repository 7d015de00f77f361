// The thread pane: aside#thread beside the channel, parent first then the replies.
import { el, reconcile, atBottom } from './dom.js';
import { renderMessage, clickIn } from './message.js';
import { conversationName } from './conversation.js';

export function createThread(app) {
  const pane = document.getElementById('thread');
  const sub = el('span', { class: 'muted' });
  const list = el('div', { class: 'messages' });
  const close = el('button', { type: 'button', class: 'close', 'aria-label': 'Close thread', title: 'Close thread',
    onclick: () => app.navigate({ thread: null }) }, '×');
  pane.append(el('header', { class: 'pane-head' }, el('h2', {}, 'Thread'), sub, close), list);
  let gen = 0;
  let shown = null;

  const onAction = (item, e) => clickIn(app, item, e);

  function render(parent, items) {
    const key = `${app.state.channel} ${app.state.thread} ${app.state.user}`;
    const stick = shown !== key || atBottom(list);
    shown = key;
    const opts = { inThread: true, onAction, onOpenThread: () => {} };
    const entry = (item, prefix) => ({
      key: `${prefix}:${item.kind || 'message'}:${item.ts}`,
      sig: `${app.renderKey}${JSON.stringify(item)}`,
      make: () => renderMessage(item, app, opts),
    });
    reconcile(list, [
      entry(parent, 'parent'),
      { key: 'sep', sig: '', make: () => el('hr', { class: 'thread-sep' }) },
      ...items.map((item) => entry(item, 'reply')),
    ]);
    if (stick) list.scrollTop = list.scrollHeight;
  }

  async function refresh() {
    const { channel, thread, user, home } = app.state;
    if (!thread || home) {
      gen += 1;
      pane.hidden = true;
      shown = null;
      list.replaceChildren();
      return;
    }
    pane.hidden = false;
    sub.textContent = conversationName(app, app.lookups.channel(channel));
    const mine = ++gen;
    let answer;
    try {
      answer = await app.api.replies(channel, thread, user);
    } catch (err) {
      answer = null;
      if (mine === gen && err.status === 404) {
        app.navigate({ thread: null }, { replace: true }); // no such thread (any more): close it
        return;
      }
      console.warn(err);
    }
    if (mine !== gen) return;
    if (!answer || !answer.parent) {
      shown = null;
      list.replaceChildren(el('p', { class: 'empty' }, 'This thread could not be loaded.'));
      return;
    }
    list.querySelector(':scope > .empty')?.remove();
    render(answer.parent, Array.isArray(answer.items) ? answer.items : []);
  }

  return { refresh };
}
