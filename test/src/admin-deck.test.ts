/**
 * decK's read side of the admin API: `deck gateway dump` (with and without `--select-tag`) makes exactly the
 * calls `deckDump` makes below (Kong/deck cmd/gateway_dump.go, Kong/go-database-reconciler pkg/dump, go-kong's
 * ListOpt: `size=1000`, `tags=a,b`, the next page by the returned `offset`), and needs `GET /` to report a Kong
 * 3.x version. Also: Kong's `tags` filter semantics and errors, `/tags`, `/endpoints`, `/schemas/...` and
 * their `validate` endpoints.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request, startGateway, type TestGateway } from '../helpers/gateway.ts';

let gw: TestGateway;

const UPSTREAM = 'http://127.0.0.1:9';

before(async () => {
  gw = await startGateway({
    services: [
      {
        name: 'team-a-orders',
        url: UPSTREAM,
        tags: ['team-a', 'prod'],
        routes: [{ name: 'team-a-orders', paths: ['/a'], tags: ['team-a'], plugins: [{ name: 'cors', tags: ['team-a'] }] }],
      },
      { name: 'team-b-users', url: UPSTREAM, tags: ['team-b', 'prod'], routes: [{ name: 'team-b-users', paths: ['/b'], tags: ['team-b'] }] },
      { name: 'untagged', url: UPSTREAM, routes: [{ name: 'untagged', paths: ['/u'] }] },
    ],
    consumers: [
      { username: 'alice', tags: ['team-a'], keyauth_credentials: [{ key: 'alice-key', tags: ['team-a'] }], acls: [{ group: 'readers', tags: ['team-a'] }] },
      { username: 'bob', tags: ['team-b'], keyauth_credentials: [{ key: 'bob-key', tags: ['team-b'] }] },
    ],
    upstreams: [
      { name: 'team-a-pool', tags: ['team-a'], targets: [{ target: '127.0.0.1:9001', tags: ['team-a'] }] },
      { name: 'team-b-pool', tags: ['team-b'], targets: [{ target: '127.0.0.1:9002', tags: ['team-b'] }] },
    ],
    plugins: [{ name: 'correlation-id', tags: ['team-b'] }],
  });
});

after(async () => {
  await gw?.stop();
});

const admin = (path: string, options?: Parameters<typeof request>[1]) => request(gw.admin + path, options);

/** What dump.Get lists: Kong's required endpoints, then those it skips when they answer 404 (Enterprise or newer ones). */
const REQUIRED = ['services', 'routes', 'plugins', 'certificates', 'snis', 'upstreams', 'consumers'] as const;
const OPTIONAL = [
  'filter-chains', 'ca_certificates', 'vaults', 'partials', 'keys', 'key-sets', 'consumer_groups',
  'key-auths', 'hmac-auths', 'jwts', 'basic-auths', 'oauth2', 'acls', 'mtls-auths',
];

/** go-kong's client.list: every page of a listing, the next one asked for by the `offset` returned. */
async function listAll(path: string, selectTags: string[]): Promise<any[] | 'absent'> {
  const entities: any[] = [];
  let offset: string | undefined;
  do {
    const query = new URLSearchParams({ size: '1000', ...(offset ? { offset } : {}), ...(selectTags.length ? { tags: selectTags.join(',') } : {}) });
    const reply = await admin(`${path}?${query}`);
    if (reply.status === 404) return 'absent';
    assert.equal(reply.status, 200, `${path}: ${reply.body}`);
    const page = reply.json();
    entities.push(...page.data);
    offset = page.offset ?? undefined;
  } while (offset);
  return entities;
}

/** `deck gateway dump [--select-tag ...]` against Kong OSS, call for call; names of what it would write. */
async function deckDump(selectTags: string[] = []): Promise<Record<string, string[]>> {
  const root = (await admin('/')).json();
  // reconcilerUtils.ParseKongVersion; below 3.0.0 decK writes `_format_version: "1.1"`.
  const [major] = String(root.version).split('.').map(Number);
  assert.ok(major >= 3, `GET / version ${root.version} makes decK write the pre-3.0 format`);
  const dumped: Record<string, string[]> = {};
  for (const path of [...REQUIRED, ...OPTIONAL]) {
    const entities = await listAll(`/${path}`, selectTags);
    if (entities === 'absent') {
      assert.ok(OPTIONAL.includes(path), `${path} must exist for decK`);
      continue;
    }
    dumped[path] = entities.map((e) => e.name ?? e.username ?? e.group ?? e.id).sort();
    if (path === 'upstreams') {
      const targets = await Promise.all(entities.map((u) => listAll(`/upstreams/${u.id}/targets`, selectTags)));
      dumped.targets = targets.flatMap((t) => (t === 'absent' ? assert.fail('targets must exist for decK') : t.map((x) => x.target))).sort();
    }
  }
  return dumped;
}

test('GET / reports the Kong version Tollgate follows, so decK uses the 3.x format, and Tollgate’s own apart', async () => {
  const info = (await admin('/')).json();
  assert.equal(info.version, '3.10.0');
  assert.equal(info.tollgate_version, '0.1.0');
});

test('deck gateway dump: every entity, through the calls decK makes', async () => {
  const dumped = await deckDump();
  assert.deepEqual(dumped.services, ['team-a-orders', 'team-b-users', 'untagged']);
  assert.deepEqual(dumped.routes, ['team-a-orders', 'team-b-users', 'untagged']);
  assert.equal(dumped.plugins.length, 2);
  assert.deepEqual(dumped.consumers, ['alice', 'bob']);
  assert.equal(dumped['key-auths'].length, 2);
  assert.deepEqual(dumped.upstreams, ['team-a-pool', 'team-b-pool']);
  assert.deepEqual(dumped.targets, ['127.0.0.1:9001', '127.0.0.1:9002']);
});

test('deck gateway dump --select-tag: only the entities carrying the tags, of every kind', async () => {
  const dumped = await deckDump(['team-a']);
  assert.deepEqual(dumped.services, ['team-a-orders']);
  assert.deepEqual(dumped.routes, ['team-a-orders']);
  assert.deepEqual(dumped.plugins, ['cors']);
  assert.deepEqual(dumped.consumers, ['alice']);
  assert.equal(dumped['key-auths'].length, 1);
  assert.deepEqual(dumped.acls, ['readers']);
  assert.deepEqual(dumped.upstreams, ['team-a-pool']);
  assert.deepEqual(dumped.targets, ['127.0.0.1:9001']);
  // Two select tags: entities carrying both.
  const both = await deckDump(['team-a', 'prod']);
  assert.deepEqual(both.services, ['team-a-orders']);
  assert.deepEqual(both.routes, []);
  const none = await deckDump(['nope']);
  for (const [kind, names] of Object.entries(none)) assert.deepEqual(names, [], kind);
});

const names = async (path: string) => ((await admin(path)).json().data as any[]).map((s) => s.name).sort();

test('tags: `a,b` keeps entities carrying all, `a/b` those carrying any; paging carries the filter', async () => {
  assert.deepEqual(await names('/services?tags=prod'), ['team-a-orders', 'team-b-users']);
  assert.deepEqual(await names('/services?tags=prod,team-b'), ['team-b-users']);
  assert.deepEqual(await names('/services?tags=team-a/team-b'), ['team-a-orders', 'team-b-users']);
  assert.deepEqual(await names('/services?tags=nope'), []);
  const first = (await admin('/services?tags=prod&size=1')).json();
  assert.deepEqual(first.data.map((s: any) => s.name), ['team-a-orders']);
  assert.equal(first.next, `/services?offset=${first.offset}&tags=prod&size=1`);
  const second = (await admin(first.next)).json();
  assert.deepEqual(second.data.map((s: any) => s.name), ['team-b-users']);
  assert.equal(second.next, null);
});

test("tags: Kong's errors for a filter it cannot read", async () => {
  const cases: [string, string][] = [
    ['a,b/c', 'invalid filter syntax'],
    ['a/b,c', 'invalid filter syntax'],
    ['', 'cannot be null'],
    ['a,,b', 'invalid filter syntax'],
    ['%01', 'invalid filter syntax'],
    ['a,b,c,d,e,f', 'cannot query more than 5 tags'],
  ];
  for (const [tags, reason] of cases) {
    const reply = await admin(`/consumers?tags=${tags}`);
    assert.equal(reply.status, 400, tags);
    assert.deepEqual(reply.json(), { code: 11, name: 'invalid options', message: `invalid option (tags: ${reason})`, options: { tags: reason } });
  }
});

test('/tags and /tags/{tag}: every tag of every entity, in Kong’s shape', async () => {
  const all = (await admin('/tags')).json();
  assert.equal(all.next, null);
  const services = (await admin('/services')).json().data as any[];
  const orders = services.find((s) => s.name === 'team-a-orders');
  assert.ok(all.data.some((row: any) => row.entity_name === 'services' && row.entity_id === orders.id && row.tag === 'prod'));
  const kinds = new Set((all.data as any[]).map((row) => row.entity_name));
  for (const kind of ['services', 'routes', 'plugins', 'consumers', 'upstreams', 'keyauth_credentials', 'acls']) assert.ok(kinds.has(kind), kind);

  const teamA = (await admin('/tags/team-a')).json();
  assert.ok(teamA.data.length > 0);
  assert.ok(teamA.data.every((row: any) => row.tag === 'team-a' && typeof row.entity_id === 'string'));
  assert.deepEqual(Object.keys(teamA.data[0]).sort(), ['entity_id', 'entity_name', 'tag']);
  assert.deepEqual((await admin('/tags/does-not-exist')).json(), { data: [], next: null });

  const paged = (await admin('/tags/team-a?size=1')).json();
  assert.equal(paged.next, `/tags/team-a?offset=${paged.offset}&size=1`);
});

test('/endpoints lists the admin API’s paths in Kong’s form and order', async () => {
  const { data } = (await admin('/endpoints')).json();
  for (const path of ['/', '/services', '/services/{id}', '/tags', '/tags/{tag}', '/schemas/{name}', '/schemas/plugins/{name}', '/endpoints', '/key-auths']) {
    assert.ok(data.includes(path), path);
  }
  assert.equal(new Set(data).size, data.length);
  assert.ok(data.indexOf('/services/{id}') < data.indexOf('/snis'), 'segment by segment: /services/{id} before /snis');
});

test('/schemas/{entity} and /schemas/plugins/{name} in Kong’s shape, entity checks included; unknown ones 404', async () => {
  const services = (await admin('/schemas/services')).json();
  const field = (schema: any, name: string) => schema.fields.find((f: any) => name in f)?.[name];
  assert.deepEqual(field(services, 'port'), { type: 'integer', default: 80, between: [0, 65535] });
  assert.deepEqual(field(services, 'protocol').default, 'http');
  assert.equal(field(services, 'host').required, true);
  assert.equal(field(services, 'tags').type, 'set');
  assert.deepEqual(field(services, 'created_at'), { type: 'number', between: [0, 2 ** 40] });
  assert.deepEqual((await admin('/schemas/vaults')).json().fields.map((f: object) => Object.keys(f)[0]), [
    'id', 'created_at', 'updated_at', 'prefix', 'name', 'description', 'config', 'tags',
  ]);

  const keyAuths = (await admin('/schemas/keyauth_credentials')).json();
  assert.deepEqual(field(keyAuths, 'consumer'), { type: 'foreign', reference: 'consumers', required: true });

  const cors = (await admin('/schemas/plugins/cors')).json();
  const config = field(cors, 'config');
  assert.equal(config.type, 'record');
  assert.equal(config.required, true);
  assert.ok(config.fields.length > 0);
  assert.equal(field(cors, 'route').type, 'foreign');

  // Kong's entity checks, where they have a declarative form.
  assert.deepEqual((await admin('/schemas/consumers')).json().entity_checks, [{ at_least_one_of: ['custom_id', 'username'] }]);
  assert.deepEqual(services.entity_checks[1], {
    conditional: { if_field: 'protocol', if_match: { not_one_of: ['https', 'tls'] }, then_field: 'client_certificate', then_match: { eq: null } },
  });
  const certificates = (await admin('/schemas/certificates')).json();
  assert.deepEqual(certificates.entity_checks[0], { mutually_required: ['cert_alt', 'key_alt'] });
  assert.equal(field(certificates, 'key').referenceable, true);
  // A plugin's, at the top of its schema, on `config.` fields (as kong/plugins/jwt/schema.lua and acl's write them).
  assert.deepEqual((await admin('/schemas/plugins/jwt')).json().entity_checks, [
    { conditional: { if_field: 'config.maximum_expiration', if_match: { gt: 0 }, then_field: 'config.claims_to_verify', then_match: { contains: 'exp' } } },
  ]);
  const acl = (await admin('/schemas/plugins/acl')).json();
  assert.deepEqual(acl.entity_checks, [{ only_one_of: ['config.allow', 'config.deny'] }, { at_least_one_of: ['config.allow', 'config.deny'] }]);
  assert.equal(field(acl, 'config').entity_checks, undefined);
  assert.equal(cors.entity_checks, undefined);

  assert.deepEqual((await admin('/schemas/nope')).json(), { message: "No entity named 'nope'" });
  assert.equal((await admin('/schemas/nope')).status, 404);
  const plugin = await admin('/schemas/plugins/nope');
  assert.equal(plugin.status, 404);
  assert.deepEqual(plugin.json(), { message: "No plugin named 'nope'" });
});

test('/schemas/{entity}/validate and /schemas/plugins/validate answer as Kong', async () => {
  const post = (path: string, body: Record<string, any>) => admin(path, { method: 'POST', body });
  const ok = await post('/schemas/services/validate', { name: 's', host: 'example.com', port: 443, protocol: 'https' });
  assert.equal(ok.status, 200);
  assert.deepEqual(ok.json(), { message: 'schema validation successful' });

  const bad = await post('/schemas/services/validate', { host: 'example.com', port: 70000 });
  assert.equal(bad.status, 400);
  assert.equal(bad.json().code, 2);
  assert.equal(bad.json().name, 'schema violation');
  assert.ok(bad.json().fields.port);

  assert.equal((await post('/schemas/consumers/validate', { username: 'x' })).status, 200);
  assert.equal((await post('/schemas/keyauth_credentials/validate', { key: 'k', consumer: { id: 'x' } })).status, 200);
  assert.equal((await post('/schemas/nope/validate', {})).status, 404);

  assert.equal((await post('/schemas/plugins/validate', { name: 'cors', config: { origins: ['*'] } })).status, 200);
  const badPlugin = await post('/schemas/plugins/validate', { name: 'cors', config: { nope: 1 } });
  assert.equal(badPlugin.status, 400);
  assert.ok(badPlugin.json().fields.config);
  const unknown = await post('/schemas/plugins/validate', { name: 'nope' });
  assert.equal(unknown.status, 400);
  assert.match(unknown.json().fields.name, /plugin 'nope' not enabled/);
});
