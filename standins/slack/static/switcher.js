// "Act as": select#as-user, one option per person ("alex · orders team").
import { el } from './dom.js';

export function userLabel(u) {
  return u.title ? `${u.name} · ${u.title}` : u.name;
}

export function createSwitcher(app) {
  const select = document.getElementById('as-user');
  let sig = null;
  select.addEventListener('change', () => app.navigate({ user: select.value }));

  function render() {
    const people = app.ws.users.filter((u) => !u.is_bot);
    const next = JSON.stringify(people);
    if (next !== sig) {
      sig = next;
      select.replaceChildren(...people.map((u) => el('option', { value: u.id }, userLabel(u))));
    }
    select.value = app.state.user;
    const me = app.lookups.user(app.state.user);
    select.title = me ? `Acting as ${me.real_name || me.name}` : '';
  }

  return { render };
}
