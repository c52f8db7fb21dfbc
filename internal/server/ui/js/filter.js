// The filter box of the memories, search and context pages: the JSON of a
// filter, the API's own grammar (docs/api.md "Filters"), so what works here
// works in a client. The API checks it: a filter it refuses shows its 422
// message, which names the offending part (filter.and[0].metadata.gt: ...).

import { APIError } from './api.js';
import { h, field } from './dom.js';

const example = '{"and": [{"tags": {"eq": "travel"}}, {"metadata": {"key": "price", "lt": 100}}]}';

// filterBox is a textarea for a filter with its labelled field; value()
// is the parsed filter (undefined when the box is empty) and throws an
// error the pages show like the API's when the text is not JSON.
export function filterBox() {
  const box = h('textarea', { name: 'filter', rows: 2, spellcheck: 'false', autocomplete: 'off', placeholder: example });
  const wrapper = field('Filter (JSON)', box,
    'Optional: metadata (eq, in, exists, gt, gte, lt, lte), tags, createdAt, updatedAt, with and/or/not.');
  wrapper.classList.add('filter');
  return {
    field: wrapper,
    value() {
      const text = box.value.trim();
      if (!text) return undefined;
      try {
        return JSON.parse(text);
      } catch (e) {
        throw new APIError(0, { title: 'Invalid filter', detail: 'filter: not JSON (' + e.message + ')' });
      }
    },
  };
}
