// One message row: article.message[data-ts], shared by the channel and thread panes.
import { el } from './dom.js';
import { mrkdwn } from './mrkdwn.js';
import { renderBlocks } from './blocks.js';

const pad = (n) => String(n).padStart(2, '0');

export function hhmm(ts) {
  const d = new Date(parseFloat(ts) * 1000);
  return Number.isNaN(d.getTime()) ? '' : `${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function timeOf(ts) {
  const d = new Date(parseFloat(ts) * 1000);
  if (Number.isNaN(d.getTime())) return null;
  return el('time', { datetime: d.toISOString(), title: d.toLocaleString() }, hhmm(ts));
}

function avatar(name, isBot) {
  // The initial is drawn by CSS (attr()), so a row's text is only what Slack would show.
  const node = el('span', { class: isBot ? 'avatar bot' : 'avatar', 'aria-hidden': 'true',
    'data-initial': (name || '?').slice(0, 1).toUpperCase() });
  if (!isBot) {
    let h = 0;
    for (const ch of name || '') h = (h * 31 + ch.codePointAt(0)) % 360;
    node.style.background = `hsl(${h} 45% 42%)`;
  }
  return node;
}

function head(name, isBot, ts) {
  return el('div', { class: 'msg-head' },
    el('span', { class: 'sender' }, name),
    isBot ? el('span', { class: 'app-tag' }, 'APP') : null,
    timeOf(ts));
}

/**
 * opts: {inThread, onAction(item, element) -> Promise, onOpenThread(ts)}.
 * Blocks win over text, as in Slack; text is the fallback.
 */
/** A button clicked in a message of the open channel (or its thread), as the acting member. */
export async function clickIn(app, item, e) {
  const { user, channel } = app.state;
  const r = await app.api.click(user, channel, item.ts, e);
  if (!r.ok) app.localError(channel, r.error || 'The click failed.');
  app.kick();
}

export function renderMessage(item, app, opts) {
  const isBot = item.kind === 'ephemeral' || Boolean(item.bot_id) || item.user === app.ws.bot.user_id;
  const user = app.lookups.user(item.user);
  const name = isBot ? app.ws.bot.name : user ? user.name : item.user || 'unknown';
  const ephemeral = item.kind === 'ephemeral';
  const hasBlocks = Array.isArray(item.blocks) && item.blocks.length > 0;
  const content = hasBlocks
    ? renderBlocks(item.blocks, { lookups: app.lookups, onAction: (e) => opts.onAction(item, e) })
    : mrkdwn(item.text || '', app.lookups);
  const edited = item.edited ? el('span', { class: 'edited' }, ' (edited)') : null;
  if (edited && !hasBlocks) content.append(edited); // inline after the text, as in Slack
  const body = el('div', { class: 'msg-body' },
    ephemeral ? el('div', { class: 'only-you' }, 'Only visible to you') : null,
    head(name, isBot, item.ts),
    item.subtype === 'thread_broadcast' ? el('div', { class: 'muted' }, 'replied to a thread') : null,
    content,
    hasBlocks ? edited : null);
  const n = Number(item.reply_count) || 0;
  if (!opts.inThread && n > 0) {
    body.append(el('div', { class: 'thread-link' },
      el('button', { type: 'button', class: 'replies', onclick: () => opts.onOpenThread(item.ts) },
        `${n} ${n === 1 ? 'reply' : 'replies'}`),
      item.latest_reply ? el('span', { class: 'muted' }, ` Last reply ${hhmm(item.latest_reply)}`) : null));
  }
  return el('article', { class: ephemeral ? 'message ephemeral' : 'message', 'data-ts': item.ts },
    avatar(name, isBot), body);
}

/** A line only this page shows (a failed command or click), as Slackbot would. */
export function renderLocal(item) {
  return el('article', { class: 'message ephemeral local-error' },
    avatar('Slackbot', true),
    el('div', { class: 'msg-body' },
      el('div', { class: 'only-you' }, 'Only visible to you'),
      head('Slackbot', false, item.ts),
      el('div', { class: 'mrkdwn' }, item.text)));
}
