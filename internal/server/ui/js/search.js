import { api, ownerPath } from './api.js';
import { h, replace, field, table, status } from './dom.js';
import { pageTitle, ownerHash, ownerNav, errorBox } from './common.js';
import { filterBox } from './filter.js';

// searchPage runs a search and shows each result's score with its parts:
// vector (cosine similarity), text (full-text rank) and decay (freshness),
// which the policy's search weights combine into the score of hybrid mode;
// with a reranker in the policy, also its relevance score, and the status
// line says whether the results are in its order.
export async function searchPage({ owner }) {
  const q = h('input', { type: 'search', name: 'query', required: true, autocomplete: 'off' });
  const mode = h('select', { name: 'mode' },
    h('option', { value: 'hybrid' }, 'Hybrid (vector + text + decay)'), h('option', { value: 'vector' }, 'Vector'), h('option', { value: 'text' }, 'Text'));
  const topK = h('input', { type: 'number', name: 'topK', min: 1, max: 100, value: 10 });
  const region = h('div', { id: 'results' }); // the status line announces the count
  const filter = filterBox();
  const form = h('form', { class: 'filters', id: 'search-form', role: 'search' },
    field('Query', q), field('Mode', mode), field('Results', topK), filter.field, h('button', { type: 'submit' }, 'Search'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!q.value.trim()) {
      status('Enter a query.', 'error');
      q.focus();
      return;
    }
    try {
      const res = await api('POST', ownerPath(owner, 'search'), { query: q.value, mode: mode.value, topK: Number(topK.value) || 10, filter: filter.value() });
      const reranked = res.reranked === true;
      replace(region, res.results.length === 0 ? h('p', {}, 'No memory matches.')
        : table('Results for \u201c' + q.value + '\u201d, best first', ['Memory', 'Score', 'Vector', 'Text', 'Decay', ...(reranked ? ['Rerank'] : []), ''],
          res.results.map((r) => h('tr', { class: 'hit' },
            h('td', { class: 'content' }, r.memory.content, h('small', {}, ' ' + r.memory.category)),
            score('score', r.score), score('vector', r.vectorScore), score('text', r.textScore), score('decay', r.decayScore),
            reranked ? score('rerank', r.rerankScore) : null,
            h('td', {}, h('a', { href: ownerHash(owner, 'm', r.memory.id) }, 'History'))))));
      status(res.results.length + ' results' + rerankNote(res) + '.');
    } catch (err) {
      replace(region, errorBox(err));
    }
  });
  return [pageTitle('Search ' + owner), ownerNav(owner, 'search'), form, region];
}

// rerankNote says in whose order the results are, when the policy has a
// reranker (the answer then carries reranked).
function rerankNote(res) {
  if (res.reranked === undefined) return '';
  return res.reranked ? ', in the reranker\u2019s order' : ', in first-stage order (not reranked: ' + res.rerankReason + ')';
}

// score is a cell with the number and a meter (no inline styles: the CSP forbids them).
function score(kind, v) {
  const n = Number(v) || 0;
  return h('td', { class: 'score', 'data-kind': kind },
    h('meter', { min: 0, max: 1, value: Math.max(0, Math.min(1, n)), 'aria-label': kind + ' score' }),
    ' ', h('span', { class: 'value' }, n.toFixed(3)));
}
