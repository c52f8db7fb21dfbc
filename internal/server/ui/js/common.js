// Pieces shared by the pages.

import { APIError } from './api.js';
import { h } from './dom.js';

// ownerHash is the hash of an owner page.
export function ownerHash(owner, ...rest) {
  return '#/' + ['o', owner, ...rest].map((s, i) => (i === 0 ? s : encodeURIComponent(s))).join('/');
}

// ownerNav is the sub-navigation of an owner's pages.
export function ownerNav(owner, current) {
  const item = (label, hash, key) => h('li', {}, h('a', { href: hash, 'aria-current': key === current ? 'page' : null }, label));
  return h('nav', { class: 'subnav', 'aria-label': 'Owner ' + owner },
    h('ul', {},
      item('Memories', ownerHash(owner), 'memories'),
      item('Search', ownerHash(owner, 'search'), 'search'),
      item('Context', ownerHash(owner, 'context'), 'context'),
      item('Sessions', ownerHash(owner, 'sessions'), 'sessions'),
      item('Erase owner', ownerHash(owner, 'erase'), 'erase')));
}

// pageTitle is the h1 of a page; it takes focus after navigation so screen
// reader and keyboard users start on the new page.
export function pageTitle(text) {
  return h('h1', { tabindex: '-1', id: 'page-title' }, text);
}

// errorBox renders an API error as an alert in place of a page's content.
export function errorBox(err) {
  const p = err instanceof APIError ? err.problem : {};
  return h('div', { class: 'error', role: 'alert' },
    h('strong', {}, (p.title || 'Error') + (err.status ? ' (' + err.status + ')' : '')),
    h('p', {}, err.message || String(err)));
}

