/**
 * Building the page from data. Values from the API (subjects, consumer names, dimension values) are
 * written as text nodes or as a few plain properties, never parsed as markup: no innerHTML anywhere
 * (the page's Content-Security-Policy makes an HTML string assignment throw).
 */

/** Properties `h` sets; none of them can load or run anything (no href, src, style, on* by name). */
const PROPERTIES = new Set(['id', 'className', 'title', 'value', 'type', 'name', 'htmlFor', 'placeholder', 'max', 'min', 'step', 'checked', 'selected', 'disabled', 'hidden', 'colSpan', 'ariaLabel', 'ariaLive', 'role', 'autocomplete']);

/** An element: `props` are properties from the list above, `on` maps event names to listeners. */
export function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null) continue;
    if (name === 'on') {
      for (const [event, listener] of Object.entries(value)) node.addEventListener(event, listener);
    } else if (name === 'data') {
      Object.assign(node.dataset, value);
    } else if (PROPERTIES.has(name)) {
      node[name] = value;
    } else {
      throw new Error(`h(): property ${name} is not allowed`);
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else if (child instanceof Node) node.append(child);
    else node.append(document.createTextNode(String(child)));
  }
}

const SVG_NS = 'http://www.w3.org/2000/svg';
/** Attributes `svg` sets: geometry and paint only (no href, no style, no event handlers). */
const SVG_ATTRIBUTES = new Set(['viewBox', 'width', 'height', 'd', 'stroke', 'stroke-width', 'fill', 'shape-rendering', 'class', 'role', 'aria-label']);

/** An SVG element (for charts drawn from numbers): `attributes` from the list above, children as `h`'s. */
export function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (!SVG_ATTRIBUTES.has(name)) throw new Error(`svg(): attribute ${name} is not allowed`);
    node.setAttribute(name, String(value));
  }
  append(node, children);
  return node;
}

/** Replaces what `container` shows. */
export function show(container, ...children) {
  container.replaceChildren();
  append(container, children);
}

/**
 * A table: `columns` are `{label, cell(row), numeric?}`; `cell` returns text or a node. `onSelect`
 * makes rows clickable (and reachable by keyboard).
 */
export function table(columns, rows, { empty = 'Nothing yet', onSelect, rowKey } = {}) {
  const head = h('thead', {}, h('tr', {}, columns.map((c) => h('th', { className: c.numeric ? 'num' : '', title: c.title }, c.label))));
  const body = h('tbody');
  if (rows.length === 0) body.append(h('tr', {}, h('td', { colSpan: columns.length, className: 'empty' }, empty)));
  for (const row of rows) {
    const tr = h('tr', { data: rowKey ? { key: rowKey(row) } : undefined }, columns.map((c) => h('td', { className: c.numeric ? 'num' : '' }, c.cell(row))));
    if (onSelect) {
      tr.tabIndex = 0;
      tr.classList.add('selectable');
      tr.addEventListener('click', () => onSelect(row, tr));
      tr.addEventListener('keydown', (event) => event.key === 'Enter' && onSelect(row, tr));
    }
    body.append(tr);
  }
  return h('table', {}, head, body);
}

/** A message in place of a section's content when its data cannot be read. */
export function failure(error) {
  return h('p', { className: 'error', role: 'alert' }, error.message);
}

const NUMBER = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });

export function number(n) {
  return n === undefined || n === null || Number.isNaN(n) ? '–' : NUMBER.format(n);
}

export function percent(ratio) {
  return ratio === undefined || ratio === null || Number.isNaN(ratio) ? '–' : `${(ratio * 100).toFixed(1)} %`;
}

/** An instant (RFC 3339 or epoch ms) in `timeZone` (default: the browser's). */
export function dateTime(value, timeZone) {
  if (value === undefined || value === null || value === '') return '–';
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short', timeZone }).format(date);
}

/** A list of strings as one line (paths, subject keys, plugins). */
export function list(values) {
  return values && values.length ? values.join(', ') : '–';
}
