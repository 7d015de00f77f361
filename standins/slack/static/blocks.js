// Block Kit -> DOM. ctx: {lookups (for mrkdwn), onAction(element) -> Promise, errors?: {block_id: text}}
import { el } from './dom.js';
import { plainText, textObject, safeHref } from './mrkdwn.js';
import { confirmDialog } from './confirm.js';

let uid = 0;

export function renderBlocks(blocks, ctx) {
  const root = el('div', { class: 'blocks' });
  (Array.isArray(blocks) ? blocks : []).forEach((b) => root.append(block(b || {}, ctx)));
  return root;
}

function block(b, ctx) {
  const t = ctx.lookups;
  switch (b.type) {
    case 'header':
      return el('h2', { class: 'block block-header' }, plainText(b.text));
    case 'section':
      return el('div', { class: 'block section' },
        el('div', { class: 'section-main' },
          b.text ? textObject(b.text, t) : null,
          Array.isArray(b.fields)
            ? el('div', { class: 'fields' }, b.fields.map((f) => el('div', { class: 'field' }, textObject(f, t))))
            : null),
        b.accessory ? el('div', { class: 'accessory' }, element(b.accessory, ctx)) : null);
    case 'context':
      return el('div', { class: 'block context' }, (b.elements || []).map((e) =>
        e.type === 'image' ? imageAlt(e) : e.type === 'mrkdwn' || e.type === 'plain_text'
          ? textObject(e, t) : unsupported('element', e.type)));
    case 'actions':
      return el('div', { class: 'block actions' }, (b.elements || []).map((e) => element(e, ctx)));
    case 'divider':
      return el('hr', { class: 'block divider' });
    case 'image':
      return el('div', { class: 'block image' }, b.title ? el('div', {}, plainText(b.title)) : null, imageAlt(b));
    case 'input':
      return input(b, ctx);
    default:
      return unsupported('block', b.type);
  }
}

function element(e, ctx) {
  if (e.type === 'button') return button(e, ctx);
  if (e.type === 'image') return imageAlt(e);
  return unsupported('element', e.type);
}

function unsupported(what, type) {
  return el('span', { class: 'unsupported' }, `[unsupported ${what}: ${type || 'unknown'}]`);
}

function imageAlt(e) {
  return el('span', { class: 'img-alt', title: 'image (not loaded)' }, e.alt_text || 'image');
}

function button(e, ctx) {
  const style = e.style === 'primary' || e.style === 'danger' ? ` ${e.style}` : '';
  const node = el('button', { type: 'button', class: `bk-button${style}` }, plainText(e.text));
  if (e.action_id) node.dataset.actionId = e.action_id;
  const link = e.url ? safeHref(String(e.url)) : null; // a link button: Slack opens it and tells the app
  if (link) node.title = link;
  node.addEventListener('click', async () => {
    if (e.confirm && !(await confirmDialog(e.confirm, ctx.lookups))) return;
    if (link) window.open(link, '_blank', 'noopener,noreferrer');
    node.disabled = true;
    try {
      await ctx.onAction(e);
    } finally {
      node.disabled = false;
    }
  });
  return node;
}

function options(e) {
  const flat = [...(e.options || []), ...(e.option_groups || []).flatMap((g) => g.options || [])];
  return flat.map((o) => el('option', { value: o.value ?? '' }, plainText(o.text)));
}

/** Input blocks: plain_text_input, static_select, datepicker. Values are read back by modal.js. */
function input(b, ctx) {
  const e = b.element || {};
  const id = `input-${++uid}`;
  const placeholder = e.placeholder ? plainText(e.placeholder) : undefined;
  let control;
  if (e.type === 'plain_text_input') {
    control = e.multiline
      ? el('textarea', { id, rows: 4, placeholder, maxlength: e.max_length })
      : el('input', { id, type: 'text', placeholder, maxlength: e.max_length });
    control.value = e.initial_value ?? '';
  } else if (e.type === 'static_select') {
    control = el('select', { id }, el('option', { value: '' }, placeholder || 'Choose an option'), options(e));
    control.value = (e.initial_option && e.initial_option.value) ?? '';
  } else if (e.type === 'datepicker') {
    control = el('input', { id, type: 'date' });
    control.value = e.initial_date ?? '';
  } else {
    return el('div', { class: 'block input' }, el('span', {}, plainText(b.label)), unsupported('element', e.type));
  }
  control.classList.add('bk-input');
  Object.assign(control.dataset, { blockId: b.block_id ?? '', actionId: e.action_id ?? '', type: e.type });
  const error = ctx.errors && b.block_id !== undefined ? ctx.errors[b.block_id] : null;
  if (error) control.setAttribute('aria-invalid', 'true');
  return el('div', { class: 'block input' },
    el('label', { for: id }, plainText(b.label), b.optional ? el('span', { class: 'muted' }, ' (optional)') : null),
    control,
    b.hint ? el('div', { class: 'hint' }, plainText(b.hint)) : null,
    error ? el('div', { class: 'field-error', role: 'alert' }, String(error)) : null);
}
