/**
 * The oauth2 admin API and persistence: runtime credentials and tokens survive a restart, gateway.yaml
 * credentials are read-only, generated provision keys are stable, token listing and revocation, and
 * every admin change takes effect on the proxy at once (no stale cache).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request, startGateway, startUpstream, tempDir, type Reply } from '../../helpers/gateway.ts';

type Gateway = Awaited<ReturnType<typeof startGateway>>;
type Upstream = Awaited<ReturnType<typeof startUpstream>>;

function config(upstreamUrl: string): Record<string, any> {
  return {
    services: [
      {
        name: 'orders',
        url: upstreamUrl,
        routes: [
          {
            name: 'orders',
            paths: ['/orders'],
            // No provision_key: one is generated, and must stay the same across restarts.
            plugins: [{ name: 'oauth2', config: { enable_client_credentials: true, enable_authorization_code: true, scopes: ['read'] } }],
          },
        ],
      },
    ],
    consumers: [
      { username: 'acme', oauth2_credentials: [{ name: 'Declared App', client_id: 'declared-app', client_secret: 'declared-secret' }] },
    ],
  };
}

let gw: Gateway;
let upstream: Upstream;
const dataDir = tempDir();

before(async () => {
  upstream = await startUpstream();
  gw = await startGateway(config(upstream.url), { dataDir });
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
});

function admin(method: string, path: string, body?: unknown): Promise<Reply> {
  return request(gw.admin + path, { method, body: body as Record<string, any> | undefined });
}

async function token(clientId: string, secret: string): Promise<Reply> {
  return request(gw.https + '/orders/oauth2/token', {
    method: 'POST',
    body: { grant_type: 'client_credentials', client_id: clientId, client_secret: secret, scope: 'read' },
  });
}

function callOrders(accessToken: string): Promise<Reply> {
  return request(gw.http + '/orders/x', { headers: { authorization: `Bearer ${accessToken}` } });
}

async function provisionKey(): Promise<string> {
  const plugins = (await admin('GET', '/plugins')).json().data;
  return plugins.find((p: any) => p.name === 'oauth2').config.provision_key;
}

describe('oauth2 admin API', () => {
  let developerId: string;
  let credential: Record<string, any>;

  it('creates a runtime consumer and credential (hashed secret) that work on the proxy', async () => {
    const consumer = await admin('POST', '/consumers', { username: 'dev-jane' });
    assert.equal(consumer.status, 201, consumer.text);
    developerId = consumer.json().id;
    const created = await admin('POST', '/consumers/dev-jane/oauth2', {
      name: 'Jane Reports',
      client_id: 'jane-app',
      client_secret: 'jane-secret',
      hash_secret: true,
      redirect_uris: ['https://jane.example/cb'],
    });
    assert.equal(created.status, 201, created.text);
    credential = created.json();
    assert.equal(credential.consumer.id, developerId);
    assert.match(credential.client_secret, /^\$pbkdf2-sha512\$i=10000,l=32\$/);
    assert.equal(credential.client_type, 'confidential');
    const issued = await token('jane-app', 'jane-secret');
    assert.equal(issued.status, 200, issued.text);
    assert.equal((await callOrders(issued.json().access_token)).status, 200);
  });

  it('GET /oauth2?client_id= gives the application name and the developer', async () => {
    const res = await admin('GET', '/oauth2?client_id=jane-app');
    assert.equal(res.status, 200);
    const [found] = res.json().data;
    assert.equal(found.name, 'Jane Reports');
    assert.equal(found.consumer.username, 'dev-jane');
    assert.deepEqual((await admin('GET', '/oauth2?client_id=nobody')).json().data, []);
  });

  it('reads by id or client_id, lists, and validates like Kong', async () => {
    assert.equal((await admin('GET', `/oauth2/${credential.id}`)).json().client_id, 'jane-app');
    assert.equal((await admin('GET', '/oauth2/jane-app')).json().id, credential.id);
    assert.equal((await admin('GET', '/consumers/dev-jane/oauth2')).json().data.length, 1);
    assert.equal((await admin('GET', '/consumers/acme/oauth2/jane-app')).status, 404);
    const list = (await admin('GET', '/oauth2')).json();
    assert.deepEqual(list.data.map((c: any) => c.client_id).sort(), ['declared-app', 'jane-app']);
    assert.equal(list.next, null);
    const noConsumer = await admin('POST', '/oauth2', { name: 'x' });
    assert.equal(noConsumer.status, 400);
    assert.equal(noConsumer.json().message, 'schema violation (consumer: required field missing)');
    const badUris = await admin('POST', '/consumers/dev-jane/oauth2', { name: 'x', redirect_uris: ['http://valid.test', 'not-valid'] });
    assert.deepEqual(badUris.json().fields, { redirect_uris: [null, "cannot parse 'not-valid'"] });
    const duplicate = await admin('POST', '/consumers/dev-jane/oauth2', { name: 'x', client_id: 'declared-app' });
    assert.equal(duplicate.status, 409);
    const lone = await admin('PATCH', '/oauth2/jane-app', { client_secret: 'new' });
    assert.deepEqual(lone.json().fields, { '@entity': ["all or none of these fields must be set: 'hash_secret', 'client_secret'"] });
  });

  it('PUT upserts by client_id; /oauth2/{c}/consumer gives the developer', async () => {
    const body = { consumer: { id: developerId }, name: 'Upserted', redirect_uris: ['https://jane.example/put'] };
    const created = await admin('PUT', '/oauth2/put-app', body);
    assert.equal(created.status, 200, created.text);
    assert.equal(created.json().client_id, 'put-app');
    const replaced = await admin('PUT', '/oauth2/put-app', { consumer: { id: developerId }, name: 'Upserted again' });
    assert.equal(replaced.json().id, created.json().id);
    assert.equal(replaced.json().redirect_uris, null);
    assert.equal((await admin('GET', '/oauth2/put-app/consumer')).json().username, 'dev-jane');
    assert.equal((await admin('DELETE', '/oauth2/put-app')).status, 204);
  });

  it('credentials from gateway.yaml are read-only', async () => {
    assert.equal((await admin('PATCH', '/oauth2/declared-app', { name: 'renamed' })).status, 405);
    assert.equal((await admin('DELETE', '/oauth2/declared-app')).status, 405);
  });

  it('PATCH renames and changes the secret; the old secret stops working', async () => {
    const res = await admin('PATCH', '/oauth2/jane-app', { name: 'Jane Reports 2', client_secret: 'rotated', hash_secret: false });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json().client_secret, 'rotated');
    assert.equal((await token('jane-app', 'jane-secret')).status, 400);
    assert.equal((await token('jane-app', 'rotated')).status, 200);
  });

  it('lists tokens without their values, reads one by id or by value, revokes one', async () => {
    const issued = (await token('declared-app', 'declared-secret')).json().access_token;
    const list = (await admin('GET', '/oauth2_tokens?credential=declared-app')).json();
    assert.ok(list.data.length >= 1);
    assert.ok(list.data.every((t: any) => t.access_token === null && t.scope === 'read'));
    const byValue = await admin('GET', `/oauth2_tokens/${issued}`);
    assert.equal(byValue.status, 200);
    const byId = await admin('GET', `/oauth2_tokens/${byValue.json().id}`);
    assert.equal(byId.json().credential.id, byValue.json().credential.id);
    assert.equal((await callOrders(issued)).status, 200);
    assert.equal((await admin('DELETE', `/oauth2_tokens/${byValue.json().id}`)).status, 204);
    assert.equal((await callOrders(issued)).status, 401);
    assert.equal((await admin('DELETE', '/oauth2_tokens/not-a-token')).status, 204);
  });

  it('creates a token with a chosen value through POST /oauth2_tokens', async () => {
    const declared = (await admin('GET', '/oauth2/declared-app')).json();
    const service = (await admin('GET', '/services/orders')).json();
    const created = await admin('POST', '/oauth2_tokens', { credential: { id: declared.id }, service: { id: service.id }, expires_in: 60, access_token: 'chosen-token-value', scope: 'read' });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json().access_token, 'chosen-token-value');
    assert.equal((await callOrders('chosen-token-value')).status, 200);
    const missing = await admin('POST', '/oauth2_tokens', {});
    assert.deepEqual(missing.json().fields, { credential: 'required field missing', expires_in: 'required field missing' });
  });

  it('a chosen value another token holds is refused (409), by POST and by PATCH, and that token is left as it was', async () => {
    const declared = (await admin('GET', '/oauth2/declared-app')).json();
    const service = (await admin('GET', '/services/orders')).json();
    const create = (access_token: string, refresh_token: string) =>
      admin('POST', '/oauth2_tokens', { credential: { id: declared.id }, service: { id: service.id }, expires_in: 60, scope: 'read', access_token, refresh_token });
    const holder = await create('held-access', 'held-refresh');
    assert.equal(holder.status, 201, holder.text);
    const other = (await create('other-access', 'other-refresh')).json();
    const refused = [
      await create('held-access', 'fresh-refresh'),
      await create('fresh-access', 'held-refresh'),
      await admin('PATCH', `/oauth2_tokens/${other.id}`, { access_token: 'held-access' }),
      await admin('PATCH', `/oauth2_tokens/${other.id}`, { refresh_token: 'held-refresh' }),
    ];
    assert.deepEqual(
      refused.map((r) => [r.status, r.json().fields]),
      [
        [409, { access_token: 'held-access' }],
        [409, { refresh_token: 'held-refresh' }],
        [409, { access_token: 'held-access' }],
        [409, { refresh_token: 'held-refresh' }],
      ],
    );
    assert.equal((await admin('GET', '/oauth2_tokens/held-access')).json().id, holder.json().id);
    assert.equal((await callOrders('held-access')).status, 200);
    assert.equal((await callOrders('other-access')).status, 200);
    assert.equal((await callOrders('fresh-access')).status, 401, 'nothing of a refused creation was written');
  });

  it('DELETE /oauth2_tokens?credential= revokes all tokens of a client (a filter is required)', async () => {
    const a = (await token('declared-app', 'declared-secret')).json().access_token;
    const b = (await token('declared-app', 'declared-secret')).json().access_token;
    assert.equal((await admin('DELETE', '/oauth2_tokens')).status, 400);
    const res = await admin('DELETE', '/oauth2_tokens?credential=declared-app');
    assert.equal(res.status, 200);
    assert.ok(res.json().revoked >= 2);
    assert.equal((await callOrders(a)).status, 401);
    assert.equal((await callOrders(b)).status, 401);
  });

  it('a generated provision_key is shown and accepted at /authorize', async () => {
    const key = await provisionKey();
    assert.match(key, /^[A-Za-z0-9]{32}$/);
    const res = await request(gw.https + '/orders/oauth2/authorize', {
      method: 'POST',
      body: { provision_key: key, authenticated_userid: 'u1', client_id: 'jane-app', response_type: 'code', scope: 'read' },
    });
    assert.equal(res.status, 200, res.text);
  });

  it('runtime credentials, tokens and the provision key survive a restart', async () => {
    const key = await provisionKey();
    const live = (await token('jane-app', 'rotated')).json().access_token;
    await gw.stop();
    gw = await startGateway(config(upstream.url), { dataDir });
    assert.equal(await provisionKey(), key);
    assert.equal((await admin('GET', '/oauth2/jane-app')).json().name, 'Jane Reports 2');
    assert.equal((await callOrders(live)).status, 200);
    assert.equal((await token('jane-app', 'rotated')).status, 200);
  });

  it('deleting a credential ends its tokens at once', async () => {
    const live = (await token('jane-app', 'rotated')).json().access_token;
    assert.equal((await callOrders(live)).status, 200);
    assert.equal((await admin('DELETE', '/consumers/dev-jane/oauth2/jane-app')).status, 204);
    assert.equal((await callOrders(live)).status, 401);
    assert.equal((await token('jane-app', 'rotated')).status, 400);
    assert.equal((await admin('GET', '/oauth2/jane-app')).status, 404);
  });

  it('deleting the consumer ends its credentials and tokens', async () => {
    await admin('POST', '/consumers', { username: 'dev-temp' });
    await admin('POST', '/consumers/dev-temp/oauth2', { name: 'Temp', client_id: 'temp-app', client_secret: 'temp-secret' });
    const live = (await token('temp-app', 'temp-secret')).json().access_token;
    assert.equal((await callOrders(live)).status, 200);
    assert.equal((await admin('DELETE', '/consumers/dev-temp')).status, 204);
    assert.equal((await callOrders(live)).status, 401);
    assert.equal((await token('temp-app', 'temp-secret')).status, 400);
  });
});
