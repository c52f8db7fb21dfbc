// Engram console: a hash router over the pages. The hash holds only owner
// and memory ids (what a person may bookmark), never the token.

import { session, api, whenUnauthorized, APIError } from './api.js';
import { h, replace, status, field, clearStaleStatus } from './dom.js';
import { pageTitle, errorBox } from './common.js';
import { ownersPage } from './owners.js';
import { memoriesPage } from './memories.js';
import { searchPage } from './search.js';
import { historyPage } from './history.js';
import { contextPage } from './context.js';
import { erasePage } from './erase.js';
import { sessionsPage, sessionPage } from './sessions.js';

const main = () => document.getElementById('main');

// routes map a hash pattern to a page; :x segments are decoded parameters.
const routes = [
  ['owners', ownersPage],
  ['o/:owner', memoriesPage],
  ['o/:owner/search', searchPage],
  ['o/:owner/context', contextPage],
  ['o/:owner/erase', erasePage],
  ['o/:owner/m/:id', historyPage],
  ['o/:owner/sessions', sessionsPage],
  ['o/:owner/s/:sid', sessionPage],
];

function match(hash) {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean);
  if (parts.length === 0) return { page: ownersPage, params: {} };
  for (const [pattern, page] of routes) {
    const segs = pattern.split('/');
    if (segs.length !== parts.length) continue;
    const params = {};
    let ok = true;
    segs.forEach((s, i) => {
      if (s.startsWith(':')) {
        try { params[s.slice(1)] = decodeURIComponent(parts[i]); } catch { ok = false; }
      } else if (s !== parts[i]) ok = false;
    });
    if (ok) return { page, params };
  }
  return null;
}

let renderSeq = 0;

async function render() {
  renderNav();
  if (!session.token()) {
    signInPage();
    return;
  }
  const m = match(location.hash);
  const seq = ++renderSeq;
  if (!m) {
    replace(main(), pageTitle('Not found'), h('p', {}, 'No console page is at this address. '), h('a', { href: '#/owners' }, 'Go to the owners'));
    focusTitle();
    return;
  }
  try {
    const node = await m.page(m.params);
    if (seq !== renderSeq) return; // a newer navigation won
    replace(main(), node);
  } catch (err) {
    if (seq !== renderSeq) return;
    replace(main(), pageTitle('Could not load the page'), errorBox(err));
  }
  focusTitle();
}

function focusTitle() {
  const t = document.getElementById('page-title');
  if (t) t.focus();
}

function renderNav() {
  const nav = document.getElementById('nav');
  if (!session.token()) {
    replace(nav);
    return;
  }
  replace(nav, h('ul', {},
    h('li', {}, h('a', { href: '#/owners' }, 'Owners')),
    h('li', {}, h('button', { type: 'button', id: 'sign-out', onclick: signOut }, 'Sign out'))));
}

function signOut() {
  session.signOut();
  status('Signed out.', 'info', true);
  location.hash = '#/owners';
  render();
}

// signInPage asks for an API token and checks it against GET /v1/owners
// before keeping it: a refused token is never stored.
function signInPage() {
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', spellcheck: 'false', required: true });
  const err = h('div', { id: 'sign-in-error', role: 'alert' });
  const form = h('form', { class: 'card', id: 'sign-in', novalidate: true },
    field('API token', input, 'A token of the runtime\u2019s <runtime>-api-token Secret, or a signed token. It is kept in this browser tab only.'),
    err,
    h('button', { type: 'submit' }, 'Sign in'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const token = input.value.trim();
    replace(err);
    if (!token) {
      replace(err, h('p', {}, 'Enter a token.'));
      input.focus();
      return;
    }
    status('Checking the token\u2026');
    try {
      await api('GET', '/v1/owners?limit=1', undefined, token);
    } catch (e) {
      // 403: a valid agent token, which may not list owners; it can still
      // open its own owner's pages.
      if (!(e instanceof APIError && e.status === 403)) {
        status('');
        const msg = e.status === 401 ? 'The service refused this token.' : e.message;
        replace(err, h('p', {}, msg));
        input.value = '';
        input.focus();
        return;
      }
    }
    session.signIn(token);
    input.value = '';
    status('Signed in.', 'info', true);
    if (!location.hash || location.hash === '#' || location.hash === '#/') location.hash = '#/owners';
    render();
  });
  replace(main(), pageTitle('Sign in'), form);
  input.focus();
}

whenUnauthorized(() => {
  session.signOut();
  status('The service refused the token; sign in again.', 'error');
  render();
});

window.addEventListener('hashchange', () => { clearStaleStatus(); render(); });
// The skip link moves focus to the content without touching the hash, which
// is the router's.
document.querySelector('a.skip').addEventListener('click', (ev) => {
  ev.preventDefault();
  document.getElementById('main').focus();
});
render();
