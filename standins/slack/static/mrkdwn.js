// Slack mrkdwn -> DOM nodes. Outside text only ever becomes text nodes; links are checked.
import { el, append } from './dom.js';
import { emojify, shortcodeAt } from './emoji.js';

const STYLES = new Map([['*', 'b'], ['_', 'i'], ['~', 's']]);
const SAFE_SCHEMES = new Set(['http:', 'https:', 'mailto:']);
const ENTITIES = { lt: '<', gt: '>', amp: '&', quot: '"', '#39': "'" };
const WORD = /[\p{L}\p{N}]/u;
const SPACE = /\s/;

/** Decode the entities Slack escapes (&lt; &gt; &amp;), in a single pass. */
export function decode(s) {
  return s.replace(/&(lt|gt|amp|quot|#39);/g, (_, name) => ENTITIES[name]);
}

/** The text of a plain_text object; emoji shortcodes replaced unless "emoji": false. */
export function plainText(obj) {
  if (obj === undefined || obj === null) return '';
  if (typeof obj === 'string') return obj;
  const text = String(obj.text ?? '');
  return obj.emoji === false ? text : emojify(text);
}

/** A text object (plain_text or mrkdwn) as a node. */
export function textObject(obj, ctx) {
  if (obj && obj.type === 'mrkdwn') return mrkdwn(obj.text, ctx);
  return el('span', { class: 'plain' }, plainText(obj));
}

/** mrkdwn text -> <div class="mrkdwn">. ctx: {user(id), channel(id), group(id), me}. */
export function mrkdwn(text, ctx) {
  const root = el('div', { class: 'mrkdwn' });
  const parts = String(text ?? '').split('```');
  parts.forEach((part, k) => {
    const closed = k % 2 === 1 && k < parts.length - 1;
    if (closed) {
      root.append(el('pre', {}, decode(part.replace(/^\n/, '').replace(/\n$/, ''))));
      return;
    }
    let seg = k % 2 === 1 ? '```' + part : part; // an unclosed fence stays text
    if (k > 0 && k % 2 === 0) seg = seg.replace(/^\n/, '');
    if (k + 1 < parts.length - 1 && k % 2 === 0) seg = seg.replace(/\n$/, '');
    lines(seg, ctx, root);
  });
  return root;
}

function lines(seg, ctx, root) {
  if (!seg) return;
  const all = seg.split('\n');
  let quote = null;
  let needBreak = false;
  for (let n = 0; n < all.length; n++) {
    const line = all[n];
    const rest = /^(>>>|&gt;&gt;&gt;)/.exec(line);
    if (rest) {
      const bq = el('blockquote');
      [line.slice(rest[0].length).replace(/^ /, ''), ...all.slice(n + 1)].forEach((l, i) => {
        if (i) bq.append(el('br'));
        append(bq, inline(l, ctx));
      });
      root.append(bq);
      return;
    }
    const q = /^(>|&gt;) ?/.exec(line);
    if (q) {
      if (quote) quote.append(el('br'));
      else root.append((quote = el('blockquote')));
      append(quote, inline(line.slice(q[0].length), ctx));
      needBreak = false;
      continue;
    }
    quote = null;
    if (needBreak) root.append(el('br'));
    append(root, inline(line, ctx));
    needBreak = true;
  }
}

const isWord = (ch) => ch !== undefined && WORD.test(ch);
const isSpace = (ch) => ch !== undefined && SPACE.test(ch);

/** End (exclusive) of a code span or <...> token starting at i, or -1. */
function atomEnd(s, i) {
  const close = s[i] === '`' ? '`' : s[i] === '<' ? '>' : null;
  if (!close) return -1;
  const j = s.indexOf(close, i + 1);
  return j > i + 1 && !s.slice(i + 1, j).includes('\n') ? j + 1 : -1;
}

function canOpen(s, i) {
  const prev = s[i - 1];
  const next = s[i + 1];
  return !isWord(prev) && prev !== s[i] && next !== undefined && !isSpace(next) && next !== s[i];
}

function findClose(s, i, mark) {
  for (let j = i + 2; j < s.length; j++) {
    const end = atomEnd(s, j);
    if (end > 0) {
      j = end - 1;
      continue;
    }
    if (s[j] === mark && !isSpace(s[j - 1]) && !isWord(s[j + 1])) return j;
  }
  return -1;
}

function inline(s, ctx) {
  const out = [];
  let buf = '';
  const flush = () => {
    if (buf) out.push(decode(buf));
    buf = '';
  };
  for (let i = 0; i < s.length; ) {
    const c = s[i];
    if (c === '`' || c === '<') {
      const end = atomEnd(s, i);
      if (end > 0) {
        flush();
        const body = s.slice(i + 1, end - 1);
        out.push(c === '`' ? el('code', {}, decode(body)) : angle(body, ctx));
        i = end;
        continue;
      }
    } else if (STYLES.has(c) && canOpen(s, i)) {
      const j = findClose(s, i, c);
      if (j > 0) {
        flush();
        out.push(el(STYLES.get(c), {}, inline(s.slice(i + 1, j), ctx)));
        i = j + 1;
        continue;
      }
    } else if (c === ':') {
      const hit = shortcodeAt(s, i);
      if (hit) {
        flush();
        out.push(el('span', { class: 'emoji', title: hit.code }, hit.emoji));
        i += hit.code.length;
        continue;
      }
    }
    buf += c;
    i += 1;
  }
  flush();
  return out;
}

/** The normalized href of an http(s)/mailto URL, else null (javascript:, data:, junk). */
export function safeHref(url) {
  try {
    const parsed = new URL(url);
    return SAFE_SCHEMES.has(parsed.protocol) ? parsed.href : null;
  } catch {
    return null;
  }
}

/** <@U1>, <#C1|name>, <!subteam^S1|@h>, <!here>, <url|label>. */
function angle(body, ctx) {
  const bar = body.indexOf('|');
  const target = bar >= 0 ? body.slice(0, bar) : body;
  const label = bar >= 0 ? decode(body.slice(bar + 1)) : '';
  if (target.startsWith('@')) {
    const id = target.slice(1);
    const user = ctx && ctx.user(id);
    const cls = ctx && id === ctx.me ? 'mention me' : 'mention';
    return el('span', { class: cls }, '@' + (user ? user.name : label.replace(/^@/, '') || id));
  }
  if (target.startsWith('#')) {
    const id = target.slice(1);
    const channel = ctx && ctx.channel(id);
    return el('span', { class: 'mention' }, '#' + (channel ? channel.name : label || id));
  }
  if (target.startsWith('!subteam^')) {
    const id = target.slice('!subteam^'.length);
    const group = ctx && ctx.group(id);
    const handle = group ? group.handle : label.replace(/^@/, '') || id;
    return el('span', { class: 'mention' }, '@' + handle);
  }
  if (target.startsWith('!')) {
    const name = target.slice(1).split('^')[0];
    if (['here', 'channel', 'everyone'].includes(name)) {
      return el('span', { class: 'mention broadcast' }, '@' + name);
    }
    return document.createTextNode(label || decode(body));
  }
  const url = decode(target);
  const href = safeHref(url);
  const text = label || (href && href.startsWith('mailto:') ? url.replace(/^mailto:/i, '') : url);
  const inPage = href && ctx && ctx.permalink ? ctx.permalink(href) : null; // a link into this workspace
  if (inPage) return el('a', { href: inPage }, text);
  if (href) return el('a', { href, target: '_blank', rel: 'noopener noreferrer' }, text);
  return document.createTextNode(text);
}
