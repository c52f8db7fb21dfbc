// DOM helpers. Everything shown comes from the API and may hold what an
// end user or an agent wrote, so text is only ever set as text (never as
// HTML); the Content-Security-Policy also requires Trusted Types, so a
// markup sink used by accident would throw instead of rendering markup.

// h creates an element: attrs are attributes (on* keys are listeners,
// true is an empty attribute, null/false are skipped); children are nodes
// or strings (set as text).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// replace empties el and appends children.
export function replace(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

let statusTimer = 0;
let keepOnce = false;

// status announces a message in the polite live region (role=status);
// keep lets it survive the next navigation (an action that moves on to
// another page, like an erasure, still says what it did).
export function status(msg, kind = 'info', keep = false) {
  const el = document.getElementById('status');
  el.textContent = msg;
  el.dataset.kind = kind;
  keepOnce = keep;
  clearTimeout(statusTimer);
  if (kind === 'info' && msg) statusTimer = setTimeout(() => { el.textContent = ''; }, 8000);
}

// clearStaleStatus empties the status on navigation, so a page does not
// show the previous page's news, unless it was set with keep.
export function clearStaleStatus() {
  if (!keepOnce) document.getElementById('status').textContent = '';
  keepOnce = false;
}

// when formats an ISO time for people, keeping the exact value as title.
export function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return h('time', { datetime: iso, title: iso }, d.toLocaleString());
}

// field is a labelled form control: a label element wrapping text and control.
export function field(label, control, hint) {
  const id = control.id || ('f-' + Math.random().toString(36).slice(2, 9));
  control.id = id;
  const parts = [h('label', { for: id }, label), control];
  if (hint) {
    const hid = id + '-hint';
    control.setAttribute('aria-describedby', hid);
    parts.push(h('small', { id: hid, class: 'hint' }, hint));
  }
  return h('div', { class: 'field' }, parts);
}

// confirmDialog asks a modal yes/no question; it resolves true on confirm.
// Focus goes to Cancel first (the safe choice) and back to the element that
// opened it when it closes; Escape cancels.
export function confirmDialog(title, body, confirmLabel, extra) {
  return new Promise((resolve) => {
    const opener = document.activeElement;
    const cancel = h('button', { type: 'button', value: 'cancel' }, 'Cancel');
    const ok = h('button', { type: 'submit', value: 'ok', class: 'danger' }, confirmLabel);
    const titleId = 'dlg-' + Math.random().toString(36).slice(2, 9);
    const form = h('form', { method: 'dialog' }, h('h2', { id: titleId }, title), h('p', {}, body), extra || null,
      h('div', { class: 'actions' }, cancel, ok));
    const dlg = h('dialog', { 'aria-labelledby': titleId, class: 'confirm' }, form);
    cancel.addEventListener('click', () => dlg.close('cancel'));
    dlg.addEventListener('close', () => {
      dlg.remove();
      if (opener && opener.isConnected) opener.focus();
      resolve(dlg.returnValue === 'ok');
    });
    document.body.append(dlg);
    dlg.showModal();
    cancel.focus();
  });
}

// table builds a table with a caption and column headers.
export function table(caption, headers, rows) {
  return h('table', {},
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, headers.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, rows));
}
