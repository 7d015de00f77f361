// Tiny DOM helpers. Text always goes in as text nodes; nothing here parses HTML.

const PROPS = new Set(['hidden', 'disabled', 'value', 'checked', 'selected', 'required']);

/** el('a', {class: 'x', href, dataset: {...}, onclick: fn}, 'text', node, [more]) */
export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (key === 'class') node.className = v;
    else if (key === 'dataset') Object.assign(node.dataset, v);
    else if (key.startsWith('on')) {
      if (typeof v !== 'function') throw new TypeError(`${key} must be a function`);
      node.addEventListener(key.slice(2), v);
    } else if (PROPS.has(key)) node[key] = v;
    else node.setAttribute(key, v === true ? '' : String(v));
  }
  return append(node, children);
}

export function append(node, children) {
  for (const c of [children].flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/**
 * Make `container`'s children match `entries` ([{key, sig, make}]), keeping the nodes whose key
 * and signature did not change (so scroll position, focus and hover survive a refetch).
 */
export function reconcile(container, entries) {
  const old = new Map();
  for (const n of container.children) if (n._key !== undefined) old.set(n._key, n);
  const seen = new Map();
  const nodes = entries.map((e) => {
    const count = seen.get(e.key) || 0;
    seen.set(e.key, count + 1);
    const key = count ? `${e.key}#${count}` : e.key;
    const prev = old.get(key);
    if (prev && prev._sig === e.sig) return prev;
    const n = e.make();
    n._key = key;
    n._sig = e.sig;
    return n;
  });
  nodes.forEach((n, i) => {
    const at = container.children[i];
    if (at !== n) container.insertBefore(n, at || null);
  });
  while (container.children.length > nodes.length) container.lastElementChild.remove();
}

/** Is the scrollable `node` scrolled (nearly) to its bottom? */
export function atBottom(node) {
  return node.scrollHeight - node.scrollTop - node.clientHeight < 60;
}

/** Compare Slack ts strings ("1764000000.000100"): as strings when the format matches. */
export function compareTs(a, b) {
  if (a.length === b.length) return a < b ? -1 : a > b ? 1 : 0;
  return parseFloat(a) - parseFloat(b);
}
