import { api, ownerPath } from './api.js';
import { h, replace, field, status } from './dom.js';
import { pageTitle, ownerNav, errorBox } from './common.js';

// erasePage erases an owner (DELETE /v1/owners/{owner}: every memory and
// all history, admin tokens only) once the person has typed the owner id.
export async function erasePage({ owner }) {
  const confirm = h('input', { type: 'text', name: 'confirm', autocomplete: 'off', spellcheck: 'false' });
  const button = h('button', { type: 'submit', class: 'danger', disabled: true }, 'Erase ' + owner);
  const result = h('div', { id: 'erase-result' });
  confirm.addEventListener('input', () => { button.disabled = confirm.value !== owner; });
  const form = h('form', { class: 'card', id: 'erase-form' },
    h('p', {}, 'This hard-deletes every memory of ', h('strong', {}, owner), ' and all their history. It cannot be undone.'),
    field('Type the owner id to confirm', confirm, 'The button is enabled when the text matches exactly.'),
    button, result);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (confirm.value !== owner) return;
    button.disabled = true;
    try {
      const res = await api('DELETE', ownerPath(owner));
      status('Erased ' + owner + ': ' + res.memories + ' memories and ' + res.history + ' history entries.', 'info', true);
      location.hash = '#/owners';
    } catch (err) {
      replace(result, errorBox(err));
      button.disabled = false;
    }
  });
  return [pageTitle('Erase owner ' + owner), ownerNav(owner, 'erase'), form];
}
