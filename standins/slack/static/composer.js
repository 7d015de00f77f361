// The message box: only slash commands reach the bot. Enter sends, Shift+Enter is a newline.
// Nothing typed is stored anywhere (no history, no localStorage).

export function createComposer(app) {
  const form = document.getElementById('composer-form');
  const box = document.getElementById('composer');
  const hint = document.getElementById('composer-hint');

  function setHint(text, warn = false) {
    hint.textContent = text;
    hint.classList.toggle('warn', warn);
  }

  function defaultHint() {
    const commands = (app.ws && app.ws.commands) || [];
    setHint(commands.length ? `Only slash commands reach the bot: ${commands.join(', ')}` : '');
  }

  function resize() {
    box.style.height = 'auto';
    box.style.height = `${Math.min(box.scrollHeight, 160)}px`;
  }

  async function send() {
    const text = box.value.trim();
    const { user, channel } = app.state;
    if (!text || !channel) return;
    if (!text.startsWith('/')) {
      setHint('Plain messages are not delivered in this stand-in: only slash commands reach the bot '
        + '(for example /backfill help).', true);
      return;
    }
    box.value = '';
    resize();
    defaultHint();
    const command = text.split(/\s/, 1)[0]; // the stand-in answers unknown commands itself
    const r = await app.api.command(user, channel, text);
    if (!r.ok) app.localError(channel, r.error || `${command} failed.`);
    app.kick();
  }

  box.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      send();
    }
  });
  box.addEventListener('input', () => {
    resize();
    if (hint.classList.contains('warn') && (box.value.startsWith('/') || !box.value)) defaultHint();
  });
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    send();
  });

  return {
    setPlaceholder(text) {
      box.placeholder = text;
      box.setAttribute('aria-label', text);
    },
    defaultHint,
  };
}
