import { api, ownerPath, query } from './api.js';
import { h, replace, when, field, table, status, confirmDialog } from './dom.js';
import { pageTitle, ownerHash, ownerNav, errorBox } from './common.js';
import { filterBox } from './filter.js';

// The default policy's categories; a runtime's policy may have others
// (type them: the API answers 422 for a category its policy does not have).
const knownCategories = ['identity', 'preference', 'project', 'contextual'];

// memoriesPage lists an owner's memories with filters, newest first, and
// deletes one after a confirmation.
export async function memoriesPage({ owner }) {
  const category = h('input', { type: 'text', name: 'category', list: 'categories', autocomplete: 'off' });
  const agent = h('input', { type: 'text', name: 'agent', autocomplete: 'off' });
  const sess = h('input', { type: 'text', name: 'session', autocomplete: 'off' });
  const state = h('select', { name: 'state' },
    h('option', { value: 'active' }, 'Active'), h('option', { value: 'inactive' }, 'Inactive'), h('option', { value: 'all' }, 'All'));
  const filter = filterBox();
  const filters = h('form', { class: 'filters', id: 'filters', 'aria-label': 'Filters' },
    h('datalist', { id: 'categories' }, knownCategories.map((c) => h('option', { value: c }))),
    field('Category', category), field('Agent', agent), field('Session', sess), field('State', state), filter.field,
    h('button', { type: 'submit' }, 'Apply filters'));
  const region = h('div', { id: 'memories' });
  const cursors = [''];
  let pageNo = 0;

  async function load(announce = true) {
    const inactive = state.value !== 'active';
    try {
      const f = filter.value();
      const page = await api('GET', ownerPath(owner, 'memories') + query({
        category: category.value.trim(), agent: agent.value.trim(), session: sess.value.trim(),
        filter: f === undefined ? '' : JSON.stringify(f),
        include: inactive ? 'inactive' : '', limit: 50, cursor: cursors[pageNo],
      }));
      if (page.nextCursor) cursors[pageNo + 1] = page.nextCursor;
      // "Inactive" is the inactive rows of each page of everything.
      const items = state.value === 'inactive' ? page.items.filter((m) => !m.active) : page.items;
      const rows = items.map((m) => memoryRow(owner, m, load));
      replace(region,
        items.length === 0 ? h('p', {}, 'No memory matches.')
          : table('Memories of ' + owner + ', page ' + (pageNo + 1), ['Content', 'Category', 'Agent', 'Session', 'Source', 'Importance', 'State', 'Created', 'Actions'], rows),
        h('div', { class: 'pager' },
          h('button', { type: 'button', disabled: pageNo === 0, onclick: () => { pageNo--; load(); } }, 'Previous page'),
          h('button', { type: 'button', disabled: !page.nextCursor, onclick: () => { pageNo++; load(); } }, 'Next page')));
      if (announce) status(items.length + ' memories shown.');
    } catch (err) {
      replace(region, errorBox(err));
    }
  }
  filters.addEventListener('submit', (ev) => {
    ev.preventDefault();
    cursors.length = 1;
    pageNo = 0;
    load();
  });
  await load();
  return [pageTitle('Owner ' + owner), ownerNav(owner, 'memories'), filters, region];
}

function memoryRow(owner, m, reload) {
  const stateText = m.active ? 'active' : (m.supersededBy ? 'superseded' : 'inactive');
  const del = h('button', { type: 'button', class: 'danger', 'data-id': m.id, 'aria-label': 'Delete memory: ' + m.content.slice(0, 60) }, 'Delete');
  del.addEventListener('click', () => deleteMemory(owner, m, reload));
  return h('tr', { 'data-id': m.id },
    h('td', { class: 'content' }, m.content, m.flags ? h('span', { class: 'flag' }, ' [' + m.flags.join(', ') + ']') : null,
      labels(m)),
    h('td', {}, m.category), h('td', {}, m.agent || ''), h('td', {}, m.session || ''), h('td', {}, m.source),
    h('td', { class: 'num' }, m.importance), h('td', {}, stateText), h('td', {}, when(m.createdAt)),
    h('td', { class: 'actions' },
      h('a', { href: ownerHash(owner, 'm', m.id), 'aria-label': 'History of: ' + m.content.slice(0, 60) }, 'History'),
      m.active ? del : null));
}

// labels shows a memory's tags and metadata (client data: set as text).
function labels(m) {
  if (!m.tags && !m.metadata) return null;
  return h('div', { class: 'labels' },
    m.tags ? m.tags.map((t) => h('span', { class: 'tag' }, t)) : null,
    m.metadata ? h('code', { class: 'metadata', title: 'metadata' }, JSON.stringify(m.metadata)) : null);
}

// deleteMemory asks for confirmation, then soft-deletes through the API;
// "on the owner's request" records source user (protected categories
// accept only that; app and admin tokens may assert it).
async function deleteMemory(owner, m, reload) {
  const asUser = h('input', { type: 'checkbox', id: 'as-user', name: 'as-user' });
  const extra = h('div', { class: 'field check' }, asUser,
    h('label', { for: 'as-user' }, 'On the owner\u2019s request (recorded as source user; needed for protected categories)'));
  const ok = await confirmDialog('Delete this memory?',
    '\u201c' + m.content + '\u201d will stop being returned by search and context. The purge job removes it for good later; its history records who deleted it.',
    'Delete memory', extra);
  if (!ok) {
    status('Nothing deleted.');
    return;
  }
  try {
    await api('DELETE', ownerPath(owner, 'memories', m.id) + (asUser.checked ? '?source=user' : ''));
    await reload(false);
    status('Memory deleted.');
    // The row and its button are gone: focus the page title, not <body>.
    const t = document.getElementById('page-title');
    if (t) t.focus();
  } catch (err) {
    status('Not deleted: ' + err.message, 'error');
  }
}
