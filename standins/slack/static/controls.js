// The demo control panel (section#demo-panel): fail dates, recover, move the SLA clock.
import { el } from './dom.js';

function showClock(clock) {
  if (!clock) return '—';
  const m = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d)(:\d\d(\.\d+)?)?(Z|\+00:00)$/.exec(clock);
  return m ? `${m[1]} ${m[2]} UTC` : clock;
}

export function createControls(app) {
  const panel = document.getElementById('demo-panel');
  let built = false;
  let gen = 0;
  const dag = el('code');
  const clock = el('output', { id: 'demo-clock' });
  const failed = el('output', { id: 'demo-failed' });
  const result = el('output', { id: 'demo-result', role: 'status' });
  const notes = el('ul');
  const dateInput = (id, value) => el('input', { id, type: 'date', min: '2021-01-01', value, required: true });
  const start = dateInput('fail-start', '2021-06-04');
  const end = dateInput('fail-end', '2021-06-06');

  async function run(call) {
    const r = await call();
    result.textContent = r.ok ? r.message || 'Done.' : r.error || 'That did not work.';
    result.classList.toggle('error', !r.ok);
    await refresh();
  }

  function fail() {
    if (!start.value || !end.value || start.value > end.value) {
      result.textContent = 'Pick a start date on or before the end date.';
      result.classList.add('error');
      return;
    }
    run(() => app.api.demoFail(start.value, end.value));
  }

  const button = (text, onclick) => el('button', { type: 'button', class: 'bk-button', onclick }, text);

  function build() {
    built = true;
    panel.append(
      el('div', { class: 'demo-row' },
        el('strong', {}, 'Demo'), dag,
        el('span', {}, 'SLA clock ', clock),
        el('span', {}, 'Failed dates ', failed),
        result),
      el('div', { class: 'demo-row' },
        el('label', { for: 'fail-start' }, 'Fail from'), start,
        el('label', { for: 'fail-end' }, 'to'), end,
        button('Fail these dates', fail),
        button('Recover', () => run(() => app.api.demoRecover())),
        el('span', { class: 'muted' }, 'SLA clock'),
        button('+1 hour', () => run(() => app.api.demoClock(1))),
        button('+1 day', () => run(() => app.api.demoClock(24))),
        el('details', {}, el('summary', {}, 'Notes'), notes)));
  }

  async function refresh() {
    panel.hidden = !app.ws.demo;
    if (!app.ws.demo) return;
    if (!built) build();
    const mine = ++gen;
    let state;
    try {
      state = await app.api.demo();
    } catch (err) {
      console.warn(err);
      return;
    }
    if (mine !== gen || !state) return;
    dag.textContent = state.dag || '';
    clock.textContent = showClock(state.clock);
    const days = Array.isArray(state.failed) ? state.failed : [];
    failed.textContent = days.length ? days.join(', ') : 'none';
    const lines = Array.isArray(state.notes) ? state.notes : [];
    notes.replaceChildren(...lines.map((n) => el('li', {}, String(n))));
  }

  return { refresh };
}
