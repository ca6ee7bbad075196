/**
 * Consumers, their oauth2 credentials and their requests. Client secrets never reach the page's
 * DOM: a credential shows its name, client id, type and redirect URIs, and whether its secret is
 * stored hashed; tokens are not listed at all.
 */
import { every, getJson, kongList } from './api.js';
import { failure, h, list, number, show, table } from './dom.js';

const POLL_MS = 10_000;

/** Requests of each consumer since start (the gateway counts them by username, else id). */
function requestsBy(counts) {
  const out = new Map();
  for (const { consumer, requests } of counts.consumers) out.set(consumer, Object.values(requests).reduce((a, b) => a + b, 0));
  return out;
}

function credentialList(credentials) {
  if (credentials.length === 0) return '–';
  return h(
    'ul',
    { className: 'credentials' },
    credentials.map((c) =>
      h(
        'li',
        {},
        h('strong', {}, c.name ?? '(unnamed)'),
        ' ',
        h('code', {}, c.client_id),
        ` ${c.client_type ?? 'confidential'}`,
        c.hash_secret ? ', secret hashed' : h('span', { className: 'warning', title: 'set hash_secret: true to store it hashed' }, ', secret stored in plain text'),
        c.redirect_uris?.length ? h('div', { className: 'muted' }, `redirect: ${list(c.redirect_uris)}`) : null,
      ),
    ),
  );
}

const columns = (requests) => [
  { label: 'Username', cell: (c) => c.username ?? '–' },
  { label: 'Custom id', cell: (c) => c.custom_id ?? '–' },
  { label: 'Id', cell: (c) => h('code', {}, c.id) },
  { label: 'Requests', numeric: true, cell: (c) => number(requests.get(c.username ?? c.id) ?? 0), title: 'authenticated requests since the gateway started' },
  { label: 'Credentials', cell: (c) => credentialList(c.credentials) },
];

export function startConsumers(root) {
  const box = root.querySelector('#consumers-table');
  every(POLL_MS, async () => {
    try {
      const [consumers, credentials, counts] = await Promise.all([kongList('/consumers'), kongList('/oauth2'), getJson('/status/traffic')]);
      const rows = consumers.map((c) => ({ ...c, credentials: credentials.filter((k) => k.consumer?.id === c.id) }));
      show(box, table(columns(requestsBy(counts)), rows, { empty: 'No consumers', rowKey: (c) => c.username ?? c.id }));
    } catch (error) {
      show(box, failure(error));
    }
  });
}
