// The open modal (the top of the acting user's stack) in <dialog id="modal">.
import { el } from './dom.js';
import { plainText } from './mrkdwn.js';
import { renderBlocks } from './blocks.js';

/** Read the inputs back as {block_id: {action_id: {type, value}}}. */
function collect(root) {
  const values = {};
  for (const c of root.querySelectorAll('.bk-input')) {
    const { blockId, actionId, type } = c.dataset;
    (values[blockId] ||= {})[actionId] = { type, value: c.value };
  }
  return values;
}

function restore(root, values) {
  for (const c of root.querySelectorAll('.bk-input')) {
    const v = values[c.dataset.blockId] && values[c.dataset.blockId][c.dataset.actionId];
    if (v) c.value = v.value;
  }
}

export function createModal(app) {
  const dialog = document.getElementById('modal');
  let view = null;
  let sig = null;
  let gen = 0;
  const status = el('p', { class: 'field-error', role: 'alert' });

  async function act(call) {
    status.textContent = '';
    const r = await call();
    if (!r.ok) status.textContent = r.error || 'That did not work.';
    await refresh();
    app.kick();
  }

  const close = () => view && act(() => app.api.viewClose(app.state.user, view.id));

  dialog.addEventListener('cancel', (ev) => {
    ev.preventDefault(); // Escape: close the view through the stand-in, like the Close button
    close();
  });

  function render(next) {
    const keep = view && view.id === next.id ? collect(dialog) : null;
    view = next;
    const errors = next.errors || null;
    const body = renderBlocks(next.blocks, {
      lookups: app.lookups,
      errors,
      onAction: (e) => act(() => app.api.viewClick(app.state.user, next.id, e)),
    });
    if (keep) restore(body, keep);
    const shownIds = new Set([...body.querySelectorAll('.bk-input')].map((c) => c.dataset.blockId));
    const stray = Object.entries(errors || {}).filter(([id]) => !shownIds.has(id));
    status.textContent = stray.map(([, msg]) => String(msg)).join(' ');
    const form = el('form', { class: 'modal-form' },
      el('header', { class: 'pane-head' }, el('h2', { id: 'modal-title' }, plainText(next.title) || 'Modal')),
      el('div', { class: 'dialog-body' }, body),
      status,
      el('div', { class: 'dialog-buttons' },
        el('button', { type: 'button', class: 'bk-button', onclick: close },
          next.close ? plainText(next.close) : 'Cancel'),
        next.submit ? el('button', { type: 'submit', class: 'bk-button primary' }, plainText(next.submit)) : null));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      act(() => app.api.viewSubmit(app.state.user, next.id, collect(form)));
    });
    dialog.replaceChildren(form);
  }

  async function refresh() {
    const mine = ++gen;
    let answer;
    try {
      answer = await app.api.modals(app.state.user);
    } catch (err) {
      console.warn(err);
      return;
    }
    if (mine !== gen) return;
    const views = Array.isArray(answer && answer.views) ? answer.views : [];
    const next = views[views.length - 1] || null;
    if (!next) {
      view = null;
      sig = null;
      if (dialog.open) dialog.close();
      dialog.replaceChildren();
      return;
    }
    const nextSig = `${app.renderKey}${JSON.stringify(next)}`;
    if (nextSig !== sig || !dialog.open) {
      sig = nextSig;
      render(next);
    }
    if (!dialog.open) dialog.showModal();
  }

  return { refresh };
}
