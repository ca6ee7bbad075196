/**
 * Consumers, their credentials of every kind (oauth2, key-auth, basic-auth, jwt, hmac-auth) and ACL groups, and
 * their requests. Secrets never reach the page's DOM: an oauth2 application shows its name, client id,
 * type and redirect URIs, and whether its secret is stored hashed; the other kinds are counted, never
 * shown (a key, a password hash, a jwt or hmac secret is the credential itself); tokens are not listed at all.
 */
import { ApiError, every, getJson, kongList } from './api.js';
import { failure, h, list, number, show, table } from './dom.js';

const POLL_MS = 10_000;

/** The credential kinds, as the page names them, and the admin API collection of each. */
const CREDENTIAL_KINDS = [
  ['oauth2', '/oauth2'],
  ['key-auth', '/key-auths'],
  ['basic-auth', '/basic-auths'],
  ['jwt', '/jwts'],
  ['hmac-auth', '/hmac-auths'],
];

/** Every item of a collection, or none when the gateway has no such collection (its plugin is not there). */
async function listIfServed(path) {
  try {
    return await kongList(path);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return [];
    throw error;
  }
}

/** Requests of each consumer since start (the gateway counts them by username, else id). */
function requestsBy(counts) {
  const out = new Map();
  for (const { consumer, requests } of counts.consumers) out.set(consumer, Object.values(requests).reduce((a, b) => a + b, 0));
  return out;
}

/** Items grouped by the id of the consumer they belong to. */
function byConsumer(items) {
  const out = new Map();
  for (const item of items) {
    const id = item.consumer?.id;
    if (!out.has(id)) out.set(id, []);
    out.get(id).push(item);
  }
  return out;
}

function oauth2Applications(credentials) {
  if (credentials.length === 0) return null;
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

/** How many of each kind, e.g. "key-auth 2, jwt 1", and the oauth2 applications in detail. */
function credentialKinds(consumer) {
  const counts = CREDENTIAL_KINDS.map(([kind]) => [kind, consumer.credentials[kind].length]).filter(([, n]) => n > 0);
  if (counts.length === 0) return '–';
  return [h('span', { className: 'kinds' }, counts.map(([kind, n]) => `${kind} ${number(n)}`).join(', ')), oauth2Applications(consumer.credentials.oauth2)];
}

const credentialTotal = (consumer) => CREDENTIAL_KINDS.reduce((sum, [kind]) => sum + consumer.credentials[kind].length, 0);

const columns = (requests) => [
  { label: 'Username', cell: (c) => c.username ?? '–' },
  { label: 'Custom id', cell: (c) => c.custom_id ?? '–' },
  { label: 'Id', cell: (c) => h('code', {}, c.id) },
  { label: 'Requests', numeric: true, cell: (c) => number(requests.get(c.username ?? c.id) ?? 0), title: 'authenticated requests since the gateway started' },
  { label: 'Credentials', numeric: true, cell: (c) => number(credentialTotal(c)), title: 'oauth2, key-auth, basic-auth, jwt and hmac-auth credentials' },
  { label: 'Kinds', cell: credentialKinds },
  { label: 'ACL groups', cell: (c) => list(c.groups) },
];

export function startConsumers(root) {
  const box = root.querySelector('#consumers-table');
  every(POLL_MS, async () => {
    try {
      const [consumers, counts, acls, ...kinds] = await Promise.all([
        kongList('/consumers'),
        getJson('/status/traffic'),
        listIfServed('/acls'),
        ...CREDENTIAL_KINDS.map(([, path]) => listIfServed(path)),
      ]);
      const owned = kinds.map(byConsumer);
      const groups = byConsumer(acls);
      const rows = consumers.map((c) => ({
        ...c,
        credentials: Object.fromEntries(CREDENTIAL_KINDS.map(([kind], k) => [kind, owned[k].get(c.id) ?? []])),
        groups: (groups.get(c.id) ?? []).map((acl) => acl.group),
      }));
      show(box, table(columns(requestsBy(counts)), rows, { empty: 'No consumers', rowKey: (c) => c.username ?? c.id }));
    } catch (error) {
      show(box, failure(error));
    }
  });
}
