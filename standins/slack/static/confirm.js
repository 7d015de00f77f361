// The Block Kit confirm dialog ({title, text, confirm, deny, style}) in <dialog id="confirm">.
import { el } from './dom.js';
import { plainText, textObject } from './mrkdwn.js';

/** Resolves true when the user picks the confirm button, false otherwise. */
export function confirmDialog(confirm, ctx) {
  const dialog = document.getElementById('confirm');
  if (dialog.open) return Promise.resolve(false);
  return new Promise((resolve) => {
    let done = false;
    const finish = (answer) => {
      if (done) return;
      done = true;
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    const style = confirm.style === 'danger' ? 'danger' : 'primary';
    const deny = el('button', { type: 'button', class: 'bk-button', onclick: () => finish(false) },
      confirm.deny ? plainText(confirm.deny) : 'Cancel');
    const yes = el('button', { type: 'button', class: `bk-button ${style}`, onclick: () => finish(true) },
      confirm.confirm ? plainText(confirm.confirm) : 'Yes');
    dialog.replaceChildren(
      el('h2', { id: 'confirm-title' }, confirm.title ? plainText(confirm.title) : 'Are you sure?'),
      el('div', { class: 'dialog-body' }, confirm.text ? textObject(confirm.text, ctx) : null),
      el('div', { class: 'dialog-buttons' }, deny, yes),
    );
    dialog.addEventListener('close', () => finish(false), { once: true });
    dialog.showModal();
    deny.focus();
  });
}
