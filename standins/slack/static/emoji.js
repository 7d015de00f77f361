// Emoji shortcodes (no colons) -> text, from the stand-in's map.
import { api } from './api.js';

let map = Object.create(null);

export async function loadEmoji() {
  try {
    map = Object.assign(Object.create(null), await api.emoji());
  } catch (err) {
    console.warn('emoji map not loaded', err);
  }
}

export function emojiFor(name) {
  const v = map[name];
  return typeof v === 'string' ? v : null;
}

const SHORTCODE = /:([a-z0-9_+'-]+):/iy;

/** The shortcode at `i` in `s` and its emoji, or null. Unknown shortcodes are not matched. */
export function shortcodeAt(s, i) {
  if (s[i] !== ':') return null;
  SHORTCODE.lastIndex = i;
  const m = SHORTCODE.exec(s);
  const emoji = m && emojiFor(m[1]);
  return emoji ? { code: m[0], emoji } : null;
}

/** Replace known shortcodes in plain text. */
export function emojify(s) {
  let out = '';
  for (let i = 0; i < s.length; ) {
    const hit = shortcodeAt(s, i);
    if (hit) {
      out += hit.emoji;
      i += hit.code.length;
    } else {
      out += s[i];
      i += 1;
    }
  }
  return out;
}
