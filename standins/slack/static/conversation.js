// The channel pane: main#channel with its header, message list and composer.
import { el, reconcile, atBottom, compareTs } from './dom.js';
import { renderMessage, renderLocal, clickIn } from './message.js';

/** A conversation's title: "# name" for channels, the person's name for DMs. */
export function conversationName(app, channel) {
  if (!channel) return '';
  if (channel.is_dm) {
    const u = app.lookups.user(channel.dm_user);
    return u ? u.name : channel.name;
  }
  return `# ${channel.name}`;
}

export function createConversation(app, composer) {
  const title = document.getElementById('channel-title');
  const list = document.getElementById('messages');
  let gen = 0;
  let shown = null;

  const onAction = (item, e) => clickIn(app, item, e);

  const onOpenThread = (ts) => app.navigate({ thread: ts });

  function header() {
    const channel = app.lookups.channel(app.state.channel);
    const name = conversationName(app, channel) || app.state.channel || '';
    title.textContent = name;
    composer.setPlaceholder(`Message ${name}`);
  }

  function render(items) {
    const key = `${app.state.channel} ${app.state.user}`;
    const stick = shown !== key || atBottom(list);
    shown = key;
    const all = [...items, ...app.localErrors(app.state.channel)].sort((a, b) => compareTs(a.ts, b.ts));
    if (!all.length) {
      list.replaceChildren(el('p', { class: 'empty' }, 'No messages yet. Try a slash command below.'));
      return;
    }
    list.querySelector(':scope > .empty')?.remove();
    reconcile(list, all.map((item) => ({
      key: `${item.kind || 'message'}:${item.ts}`,
      sig: `${app.renderKey}${JSON.stringify(item)}`,
      make: () => (item.kind === 'local' ? renderLocal(item)
        : renderMessage(item, app, { onAction, onOpenThread })),
    })));
    if (stick) list.scrollTop = list.scrollHeight;
  }

  async function refresh() {
    const { channel, user } = app.state;
    header();
    if (!channel) return;
    const mine = ++gen;
    let answer;
    try {
      answer = await app.api.history(channel, user);
    } catch (err) {
      answer = null;
      console.warn(err);
    }
    if (mine !== gen) return;
    if (!answer || !Array.isArray(answer.items)) {
      shown = null;
      list.replaceChildren(el('p', { class: 'empty' }, 'This conversation could not be loaded.'));
      return;
    }
    render(answer.items);
  }

  return { refresh, header };
}
