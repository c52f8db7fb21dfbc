import { api, ownerPath, query } from './api.js';
import { h, when, status } from './dom.js';
import { pageTitle, ownerHash, ownerNav } from './common.js';

const maxChain = 10;
// The history comes a page at a time (at most 1,000 rows and the runtime's
// byte cap each); a memory keeps its first row and its newest
// limits.maxHistoryPerMemory, so a few pages hold it all.
const maxHistoryPages = 20;

// historyPage shows one memory, its supersede chain (what replaced it, what
// it replaced) and its history as a timeline: who wrote what, when, with
// the redactions, merges and supersedes the engine recorded.
export async function historyPage({ owner, id }) {
  const [m, hist] = await Promise.all([
    api('GET', ownerPath(owner, 'memories', id)),
    historyPages(owner, id),
  ]);
  const chain = await supersededChain(owner, m);
  const replaced = await replacedBy(owner, id);
  status(hist.items.length + ' history entries' + (hist.more ? ' (the newest are on further pages of the API).' : '.'));
  return [
    pageTitle('Memory history'),
    ownerNav(owner, ''),
    h('section', { class: 'card', 'aria-labelledby': 'mem-h' },
      h('h2', { id: 'mem-h' }, 'Memory'),
      h('p', { class: 'content', id: 'memory-content' }, m.content),
      h('dl', { class: 'facts' },
        fact('Id', m.id), fact('Category', m.category), fact('Source', m.source), fact('Importance', m.importance),
        fact('State', m.active ? 'active' : 'inactive'), fact('Agent', m.agent || '\u2014'), fact('Session', m.session || '\u2014'),
        fact('Created', when(m.createdAt)), fact('Updated', when(m.updatedAt)),
        fact('Expires', m.expiresAt ? when(m.expiresAt) : 'never'), fact('Reads', m.accessCount))),
    h('section', { 'aria-labelledby': 'chain-h' },
      h('h2', { id: 'chain-h' }, 'Supersede chain'),
      chain.length === 0 && replaced.length === 0 ? h('p', {}, 'Not superseded, and it replaced no memory.') : null,
      replaced.length ? h('p', {}, 'It replaced: ', replaced.map((r, i) => [i ? ', ' : '', memLink(owner, r.id, r.content)])) : null,
      chain.length ? h('ol', { class: 'chain' }, chain.map((c) => h('li', {}, 'superseded by ', memLink(owner, c.id, c.content)))) : null),
    h('section', { 'aria-labelledby': 'tl-h' },
      h('h2', { id: 'tl-h' }, 'Timeline'),
      h('ol', { class: 'timeline', id: 'timeline' }, hist.items.map((e) => entry(owner, e)))),
  ];
}

// historyPages reads the memory's history page after page, oldest first.
async function historyPages(owner, id) {
  const items = [];
  let cursor = '';
  for (let pages = 0; pages < maxHistoryPages; pages++) {
    const page = await api('GET', ownerPath(owner, 'memories', id, 'history') + query({ limit: 1000, cursor }));
    items.push(...page.items);
    if (!page.nextCursor) return { items, more: false };
    cursor = page.nextCursor;
  }
  return { items, more: true };
}

function fact(k, v) {
  return [h('dt', {}, k), h('dd', {}, v)];
}

function memLink(owner, id, text) {
  return h('a', { href: ownerHash(owner, 'm', id) }, text ? '\u201c' + text + '\u201d' : id);
}

// supersededChain follows supersededBy forward (bounded: a chain is
// checked for cycles by the engine, the bound guards the page anyway).
async function supersededChain(owner, m) {
  const out = [];
  let next = m.supersededBy;
  while (next && out.length < maxChain) {
    try {
      const n = await api('GET', ownerPath(owner, 'memories', next));
      out.push(n);
      next = n.supersededBy;
    } catch {
      out.push({ id: next, content: '' }); // purged since
      break;
    }
  }
  return out;
}

// replacedBy finds the memories superseded by id among the owner's latest
// memories: the first page of up to 500 (the API has no reverse lookup).
async function replacedBy(owner, id) {
  try {
    const page = await api('GET', ownerPath(owner, 'memories') + query({ include: 'inactive', limit: 500 }));
    return page.items.filter((x) => x.supersededBy === id);
  } catch {
    return [];
  }
}

// entry is one history row: when, what, who, the content before and after,
// and the details (similarity of a merge, redactions, supersededBy...).
function entry(owner, e) {
  const details = e.details ? Object.entries(e.details) : [];
  return h('li', { class: 'event', 'data-action': e.action },
    h('div', { class: 'when' }, when(e.at)),
    h('div', {},
      h('strong', { class: 'action' }, e.action), ' by ', h('span', { class: 'actor' }, e.actor),
      e.actorId ? [' (', h('code', {}, e.actorId), ')'] : null,
      e.oldContent != null ? h('p', {}, h('span', { class: 'label' }, 'before: '), h('del', {}, e.oldContent)) : null,
      e.newContent != null ? h('p', {}, h('span', { class: 'label' }, 'after: '), h('ins', {}, e.newContent)) : null,
      details.length ? h('dl', { class: 'details' }, details.map(([k, v]) => [h('dt', {}, k), h('dd', {}, detailValue(owner, k, v))])) : null));
}

function detailValue(owner, k, v) {
  if ((k === 'supersededBy' || k === 'by' || k === 'replacedBy') && typeof v === 'string') return memLink(owner, v);
  if (Array.isArray(v)) return v.join(', ');
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : v.toFixed(3);
  if (v && typeof v === 'object') return JSON.stringify(v);
  return String(v);
}
