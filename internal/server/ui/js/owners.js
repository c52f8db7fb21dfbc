import { api, query } from './api.js';
import { h, replace, when, field, table, status } from './dom.js';
import { pageTitle, ownerHash, errorBox } from './common.js';

// ownersPage lists the owners (GET /v1/owners) a page at a time, and opens
// an owner by id (for agent tokens, which may not list owners).
export async function ownersPage() {
  const region = h('div', { id: 'owners' });
  const cursors = ['']; // cursors[i] starts page i
  let pageNo = 0;

  async function load(announce = true) {
    try {
      const page = await api('GET', '/v1/owners' + query({ limit: 25, cursor: cursors[pageNo] }));
      if (page.nextCursor) cursors[pageNo + 1] = page.nextCursor;
      const rows = page.items.map((o) => h('tr', {},
        h('th', { scope: 'row' }, h('a', { href: ownerHash(o.owner) }, o.owner)),
        h('td', { class: 'num' }, o.active), h('td', { class: 'num' }, o.inactive), h('td', {}, when(o.lastActivity))));
      const prev = h('button', { type: 'button', disabled: pageNo === 0, onclick: () => { pageNo--; load(); } }, 'Previous page');
      const next = h('button', { type: 'button', disabled: !page.nextCursor, onclick: () => { pageNo++; load(); } }, 'Next page');
      replace(region,
        page.items.length === 0 ? h('p', {}, 'No owner has memories yet.')
          : table('Owners, page ' + (pageNo + 1), ['Owner', 'Active', 'Inactive', 'Last activity'], rows),
        h('div', { class: 'pager' }, prev, next));
      if (announce) status(page.items.length + ' owners on page ' + (pageNo + 1) + '.');
    } catch (err) {
      replace(region, err.status === 403
        ? h('p', {}, 'This token may not list owners (agent tokens are bound to one owner). Open the owner below.')
        : errorBox(err));
    }
  }

  const input = h('input', { type: 'text', name: 'owner', autocomplete: 'off', required: true });
  const open = h('form', { class: 'inline', id: 'open-owner' },
    field('Owner id', input), h('button', { type: 'submit' }, 'Open'));
  open.addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (input.value.trim()) location.hash = ownerHash(input.value.trim());
  });
  await load(false); // keep what the last action announced
  return [pageTitle('Owners'), open, region];
}
