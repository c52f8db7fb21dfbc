import { api, ownerPath } from './api.js';
import { h, replace, field, status } from './dom.js';
import { pageTitle, ownerNav, errorBox } from './common.js';
import { filterBox } from './filter.js';

// contextPage previews what POST /context renders for a prompt, with the
// token budget on a slider (re-rendered as it moves, debounced).
export async function contextPage({ owner }) {
  const budget = h('input', { type: 'range', name: 'maxTokens', min: 50, max: 4000, step: 50, value: 1000 });
  const budgetOut = h('output', { for: budget.id || '', id: 'budget-value' }, '1000 tokens');
  const q = h('input', { type: 'text', name: 'query', autocomplete: 'off' });
  const out = h('div', { id: 'context-out' });
  const filter = filterBox();
  let timer = 0;
  let seq = 0;

  async function load() {
    const mine = ++seq;
    try {
      const res = await api('POST', ownerPath(owner, 'context'), { maxTokens: Number(budget.value), query: q.value.trim() || undefined, filter: filter.value() });
      if (mine !== seq) return;
      replace(out,
        h('p', { id: 'context-summary' }, res.tokens + ' of ' + budget.value + ' tokens, ' + res.ids.length + ' memories, ' + res.omitted + ' left out.'),
        h('pre', { class: 'context', tabindex: '0', 'aria-label': 'Rendered context' }, res.text || '(nothing to render)'));
      status('Context: ' + res.tokens + ' tokens, ' + res.ids.length + ' memories.');
    } catch (err) {
      if (mine === seq) replace(out, errorBox(err));
    }
  }
  const budgetField = field('Token budget', budget, 'Move with the arrow keys; the preview follows.');
  budget.addEventListener('input', () => {
    budgetOut.value = budget.value + ' tokens';
    clearTimeout(timer);
    timer = setTimeout(load, 250);
  });
  budgetOut.setAttribute('for', budget.id);
  budgetField.append(budgetOut);
  const form = h('form', { class: 'filters', id: 'context-form' }, budgetField, field('Query (optional)', q), filter.field, h('button', { type: 'submit' }, 'Render'));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); load(); });
  await load();
  return [pageTitle('Context preview ' + owner), ownerNav(owner, 'context'), form, out];
}
