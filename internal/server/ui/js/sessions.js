import { api, ownerPath, query } from './api.js';
import { h, replace, when, table, status } from './dom.js';
import { pageTitle, ownerHash, ownerNav, errorBox } from './common.js';

// sessionsPage lists an owner's conversation sessions, most recently active first.
export async function sessionsPage({ owner }) {
  const region = h('div', { id: 'sessions' });
  const cursors = [''];
  let pageNo = 0;
  async function load(announce = true) {
    try {
      const page = await api('GET', ownerPath(owner, 'sessions') + query({ limit: 50, cursor: cursors[pageNo] }));
      if (page.nextCursor) cursors[pageNo + 1] = page.nextCursor;
      const rows = page.sessions.map((s) => h('tr', { 'data-id': s.id },
        h('th', { scope: 'row' }, h('a', { href: ownerHash(owner, 's', s.id) }, s.title || s.id)),
        h('td', {}, s.agent || ''), h('td', { class: 'num' }, s.messageCount), h('td', { class: 'num' }, s.tokenCount),
        h('td', { class: 'num' }, s.summaryCount), h('td', {}, s.archived ? 'archived' : 'open'), h('td', {}, when(s.lastActiveAt))));
      replace(region,
        page.sessions.length === 0 ? h('p', {}, 'No conversation sessions.')
          : table('Sessions of ' + owner + ', page ' + (pageNo + 1), ['Session', 'Agent', 'Messages', 'Tokens', 'Summaries', 'State', 'Last active'], rows),
        h('div', { class: 'pager' },
          h('button', { type: 'button', disabled: pageNo === 0, onclick: () => { pageNo--; load(); } }, 'Previous page'),
          h('button', { type: 'button', disabled: !page.nextCursor, onclick: () => { pageNo++; load(); } }, 'Next page')));
      if (announce) status(page.sessions.length + ' sessions shown.');
    } catch (err) {
      replace(region, errorBox(err));
    }
  }
  await load(false);
  return [pageTitle('Sessions of ' + owner), ownerNav(owner, 'sessions'), region];
}

const lastMessages = 200;

// sessionPage shows one session: its statistics, its summary tree (roots
// are what the summary window starts with; each node opens to its
// children and expands to the messages it covers) and its latest messages.
export async function sessionPage({ owner, sid }) {
  const [s, msgs, win] = await Promise.all([
    api('GET', ownerPath(owner, 'sessions', sid)),
    api('GET', ownerPath(owner, 'sessions', sid, 'messages') + query({ last: lastMessages })),
    api('POST', ownerPath(owner, 'sessions', sid, 'window'), { strategy: 'summary', budget: 1000000 }),
  ]);
  const roots = win.items.filter((i) => i.kind === 'summary').map((i) => i.summary);
  status(s.messageCount + ' messages, ' + s.summaryCount + ' summaries.');
  return [
    pageTitle('Session ' + (s.title || s.id)),
    ownerNav(owner, 'sessions'),
    h('section', { class: 'card', 'aria-labelledby': 'sess-h' },
      h('h2', { id: 'sess-h' }, 'Session'),
      h('dl', { class: 'facts' },
        [['Id', s.id], ['Agent', s.agent || '\u2014'], ['State', s.archived ? 'archived' : 'open'], ['Messages', s.messageCount],
          ['Tokens', s.tokenCount], ['Summaries', s.summaryCount], ['Summarized through', s.summarizedThrough ? 'message ' + s.summarizedThrough : 'nothing yet'],
          ['Unsummarized tokens', s.unsummarizedTokens], ['Created', when(s.createdAt)], ['Last active', when(s.lastActiveAt)]]
          .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]))),
    h('section', { 'aria-labelledby': 'tree-h' },
      h('h2', { id: 'tree-h' }, 'Summary tree'),
      roots.length === 0 ? h('p', {}, 'No summaries yet: the session has not been compacted.')
        : h('ul', { class: 'tree', id: 'summary-tree' }, roots.map((r) => summaryNode(owner, r)))),
    h('section', { 'aria-labelledby': 'msgs-h' },
      h('h2', { id: 'msgs-h' }, msgs.items.length < s.messageCount ? 'Latest ' + msgs.items.length + ' messages' : 'Messages'),
      messageList(msgs.items, 'messages')),
  ];
}

// summaryNode is one summary with buttons to open its children (condensed
// summaries) and to expand it to the original messages.
function summaryNode(owner, sm) {
  const kids = h('div', { class: 'kids' });
  const exp = h('div', { class: 'expansion' });
  const range = 'messages ' + sm.earliestSeq + '\u2013' + sm.latestSeq;
  const node = h('li', { class: 'summary', 'data-id': sm.id, 'data-depth': sm.depth },
    h('div', { class: 'summary-head' },
      h('strong', {}, sm.depth === 0 ? 'Leaf' : 'Depth ' + sm.depth), ' \u00b7 ', range, ' \u00b7 ', sm.tokens + ' tokens \u00b7 ', sm.method),
    h('p', { class: 'content' }, sm.content));
  const actions = h('div', { class: 'actions' });
  if (sm.depth > 0) {
    const open = h('button', { type: 'button', 'aria-expanded': 'false', class: 'children' }, 'Show children');
    open.addEventListener('click', async () => {
      if (open.getAttribute('aria-expanded') === 'true') {
        open.setAttribute('aria-expanded', 'false');
        open.textContent = 'Show children';
        replace(kids);
        return;
      }
      try {
        const d = await api('GET', ownerPath(owner, 'summaries', sm.id));
        replace(kids, h('ul', { class: 'tree' }, (d.children || []).map((c) => summaryNode(owner, c))));
        open.setAttribute('aria-expanded', 'true');
        open.textContent = 'Hide children';
        status((d.children || []).length + ' child summaries.');
      } catch (err) {
        replace(kids, errorBox(err));
      }
    });
    actions.append(open);
  }
  const expand = h('button', { type: 'button', 'aria-expanded': 'false', class: 'expand' }, 'Expand to messages');
  expand.addEventListener('click', async () => {
    if (expand.getAttribute('aria-expanded') === 'true') {
      expand.setAttribute('aria-expanded', 'false');
      expand.textContent = 'Expand to messages';
      replace(exp);
      return;
    }
    try {
      const e = await api('GET', ownerPath(owner, 'summaries', sm.id, 'expand'));
      replace(exp, messageList(e.messages, 'expansion-' + sm.id),
        e.truncated ? h('p', { class: 'hint' }, 'Only the oldest messages that fit 20,000 tokens and the size cap are shown; messages ' +
          e.omittedFrom + ' to ' + (e.omittedTo - 1) + ' are left out (read them in the message list).') : null);
      expand.setAttribute('aria-expanded', 'true');
      expand.textContent = 'Collapse messages';
      status('Expanded ' + range + ': ' + e.messages.length + ' messages.');
    } catch (err) {
      replace(exp, errorBox(err));
    }
  });
  actions.append(expand);
  node.append(actions, kids, exp);
  return node;
}

function messageList(items, id) {
  return h('ol', { class: 'messages', id }, items.map((m) => h('li', { class: 'message', 'data-role': m.role, 'data-seq': m.seq },
    h('div', { class: 'meta' }, '#' + m.seq + ' ', h('strong', {}, m.role), m.toolName ? ' (' + m.toolName + ')' : '', ' \u00b7 ', when(m.createdAt),
      m.flags && m.flags.length ? h('span', { class: 'flag' }, ' [' + m.flags.join(', ') + ']') : null),
    h('p', { class: 'content' }, m.content))));
}
