/**
 * Kong's acl cases (spec/03-plugins/18-acl/01-api, 02-access, 03-invalidations) against a real gateway:
 * allow and deny lists, single and several groups, X-Consumer-Groups and hide_groups_header, the groups
 * an authentication plugin vouches for (`ctx.shared.authenticated_groups`, set here by a test plugin as
 * Kong's spec sets them with its ctx-checker) and always_use_authenticated_groups, the anonymous consumer;
 * acl after every authentication plugin (key-auth, basic-auth, jwt, oauth2); group changes through the
 * admin API taking effect at once; and the `acls` admin API with groups named per consumer (and only names
 * X-Consumer-Groups can carry).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { loadConfigText } from '../../../src/config/load.ts';
import type { PluginDefinition } from '../../../src/pdk/index.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { request, startUpstream, type Reply, type Upstream } from '../../helpers/gateway.ts';
import { startWithRegistry, type RegistryGateway } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';

const ANONYMOUS_ID = '9a1c7a52-0000-4000-8000-00000000a0a0';

/**
 * Kong's ctx-checker, as its acl spec uses it: `authenticated_groups` from the `x-test-groups` request
 * header (comma-separated; present but empty = an empty list). Runs before acl (priority 950).
 */
const groupsSetter: PluginDefinition = {
  name: 'groups-setter',
  version: '0.0.0',
  priority: 1000,
  configSchema: { type: 'record', fields: {} },
  create: () => ({
    access(ctx) {
      const header = ctx.headers['x-test-groups'];
      if (typeof header === 'string') ctx.shared.authenticated_groups = header === '' ? [] : header.split(',');
    },
  }),
};

let gw: RegistryGateway;
let upstream: Upstream;

function route(name: string, acl: Record<string, unknown>, auth: Record<string, unknown>[] = [{ name: 'key-auth' }]) {
  return { name, hosts: [`${name}.test`], plugins: [{ name: 'acl', config: acl }, ...auth] };
}

const setter = [{ name: 'groups-setter' }];

before(async () => {
  upstream = await startUpstream();
  gw = await startWithRegistry(
    {
      services: [
        {
          name: 'echo',
          url: upstream.url,
          routes: [
            route('acl1', { allow: ['admin'] }, []),
            route('acl1b', { allow: ['admin'] }, setter),
            route('acl2', { allow: ['admin'] }),
            route('acl3', { deny: ['admin'] }),
            route('acl3b', { deny: ['admin'] }, setter),
            route('acl4', { allow: ['admin', 'pro'] }),
            route('acl4b', { allow: ['admin', 'pro'] }, setter),
            route('acl5', { deny: ['admin', 'pro'] }),
            route('acl6', { deny: ['admin', 'pro', 'hello'] }),
            route('acl7', { allow: ['admin', 'pro', 'hello'] }),
            route('acl8', { allow: ['anonymous'] }, [{ name: 'key-auth', config: { anonymous: ANONYMOUS_ID } }]),
            route('acl8b', { allow: ['anonymous'] }, [{ name: 'key-auth', config: { anonymous: ANONYMOUS_ID } }, ...setter]),
            route('acl9', { allow: ['admin'], hide_groups_header: true }),
            route('acl11', { allow: ['admin'] }, [{ name: 'key-auth', config: { anonymous: ANONYMOUS_ID } }, ...setter]),
            route('acl12', { allow: ['admin'], always_use_authenticated_groups: true }, [{ name: 'key-auth' }, ...setter]),
            route('acl-basic', { allow: ['admin'] }, [{ name: 'basic-auth' }]),
            route('acl-jwt', { allow: ['admin'] }, [{ name: 'jwt' }]),
            route('acl-oauth2', { allow: ['admin'] }, [{ name: 'oauth2', config: { enable_client_credentials: true, provision_key: 'pk' } }]),
          ],
        },
      ],
      consumers: [
        { username: 'consumer1', keyauth_credentials: [{ key: 'apikey123' }] },
        {
          username: 'consumer2',
          keyauth_credentials: [{ key: 'apikey124' }],
          basicauth_credentials: [{ username: 'consumer2', password: 'secret2' }],
          jwt_secrets: [{ key: 'consumer2-jwt', secret: 'consumer2-jwt-secret' }],
          oauth2_credentials: [{ name: 'app', client_id: 'consumer2-app', client_secret: 'consumer2-secret' }],
          acls: [{ group: 'admin' }],
        },
        { username: 'consumer3', keyauth_credentials: [{ key: 'apikey125' }], acls: [{ group: 'pro' }, { group: 'hello' }] },
        { username: 'consumer4', keyauth_credentials: [{ key: 'apikey126' }], acls: [{ group: 'free' }, { group: 'hello' }] },
        { id: ANONYMOUS_ID, username: 'anonymous', acls: [{ group: 'anonymous' }] },
      ],
    },
    new Map([...bundledPlugins, [groupsSetter.name, groupsSetter]]),
  );
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
});

function get(host: string, path = '/request', headers: Record<string, string> = {}): Promise<Reply> {
  return request(`${gw.http}${path}`, { headers: { host: `${host}.test`, ...headers } });
}

function admin(method: string, path: string, body?: Record<string, unknown>): Promise<Reply> {
  return request(gw.admin + path, { method, body });
}

function passed(reply: Reply): Record<string, string | undefined> {
  assert.equal(reply.status, 200, reply.text);
  return reply.json().headers;
}

function forbidden(reply: Reply) {
  assert.equal(reply.status, 403, reply.text);
  assert.equal(reply.json().message, 'You cannot consume this service');
}

describe('Kong acl: consumer or authenticated groups', () => {
  it('AC01 without any authentication: 401; with groups an authentication plugin vouched for: they decide', async () => {
    const missing = await get('acl1');
    assert.equal(missing.status, 401);
    assert.equal(missing.json().message, 'Unauthorized');
    assert.equal(passed(await get('acl1b', '/request', { 'x-test-groups': 'admin' }))['x-authenticated-groups'], 'admin');
    forbidden(await get('acl1b', '/request', { 'x-test-groups': 'user' }));
  });

  it('AC02 a consumer with a credential: its groups', async () => {
    assert.equal(passed(await get('acl2', '/request?apikey=apikey124'))['x-consumer-groups'], 'admin');
    forbidden(await get('acl2', '/request?apikey=apikey123'));
  });
});

describe('Kong acl: simple lists', () => {
  it('AC03 allow: in the group passes, out of it (or in no group at all) is 403', async () => {
    passed(await get('acl2', '/request?apikey=apikey124'));
    forbidden(await get('acl2', '/request?apikey=apikey125'));
    forbidden(await get('acl2', '/request?apikey=apikey123'));
  });

  it('AC04 deny: in the group is 403, out of it (or in no group) passes', async () => {
    forbidden(await get('acl3', '/request?apikey=apikey124'));
    passed(await get('acl3', '/request?apikey=apikey125'));
    const groupless = passed(await get('acl3', '/request?apikey=apikey123'));
    assert.equal(groupless['x-consumer-groups'], undefined);
    forbidden(await get('acl3b', '/request', { 'x-test-groups': 'admin' }));
    passed(await get('acl3b', '/request', { 'x-test-groups': '' }));
  });

  it('AC05 hide_groups_header keeps X-Consumer-Groups from the upstream; client-sent copies never pass', async () => {
    assert.equal(passed(await get('acl9', '/request?apikey=apikey124'))['x-consumer-groups'], undefined);
    assert.equal(passed(await get('acl2', '/request?apikey=apikey124', { 'x-consumer-groups': 'root' }))['x-consumer-groups'], 'admin');
    assert.equal(passed(await get('acl9', '/request?apikey=apikey124', { 'x-consumer-groups': 'root', 'x-authenticated-groups': 'root' }))['x-consumer-groups'], undefined);
  });
});

describe('Kong acl: several groups', () => {
  it('AC06 allow [admin, pro]: one of them suffices; the header lists every group', async () => {
    assert.equal(passed(await get('acl4', '/request?apikey=apikey125'))['x-consumer-groups'], 'pro, hello');
    forbidden(await get('acl4', '/request?apikey=apikey126'));
    passed(await get('acl4b', '/request', { 'x-test-groups': 'pro,hello' }));
    forbidden(await get('acl4b', '/request', { 'x-test-groups': 'free,hello' }));
  });

  it('AC07 deny [admin, pro] / [admin, pro, hello]: one denied group denies', async () => {
    forbidden(await get('acl5', '/request?apikey=apikey125'));
    passed(await get('acl5', '/request?apikey=apikey126'));
    forbidden(await get('acl6', '/request?apikey=apikey126'));
  });

  it('AC08 allow [admin, pro, hello]: one allowed group allows', async () => {
    passed(await get('acl7', '/request?apikey=apikey126'));
  });
});

describe('Kong acl: anonymous and authenticated groups', () => {
  it("AC09 the anonymous consumer's own groups apply", async () => {
    const headers = passed(await get('acl8'));
    assert.equal(headers['x-anonymous-consumer'], 'true');
    assert.equal(headers['x-consumer-groups'], 'anonymous');
    forbidden(await get('acl8', '/request?apikey=apikey124'));
    assert.equal(passed(await get('acl8b', '/request', { 'x-test-groups': 'anonymous' }))['x-authenticated-groups'], 'anonymous');
  });

  it('AC10 permits an authenticated consumer even when authenticated groups are present; authenticated groups over the anonymous consumer', async () => {
    const consumer = passed(await get('acl11', '/request?apikey=apikey124', { 'x-test-groups': 'user' }));
    assert.equal(consumer['x-consumer-groups'], 'admin');
    assert.equal(consumer['x-authenticated-groups'], undefined);
    assert.equal(passed(await get('acl11', '/request', { 'x-test-groups': 'admin' }))['x-authenticated-groups'], 'admin');
    forbidden(await get('acl11', '/request?apikey=apikey123', { 'x-test-groups': 'admin' }));
    forbidden(await get('acl11', '/request', { 'x-test-groups': 'user' }));
  });

  it('AC11 always_use_authenticated_groups: they win when present, the consumer groups otherwise', async () => {
    assert.equal(passed(await get('acl12', '/request?apikey=apikey123', { 'x-test-groups': 'admin' }))['x-authenticated-groups'], 'admin');
    passed(await get('acl12', '/request?apikey=apikey124'));
    forbidden(await get('acl12', '/request?apikey=apikey124', { 'x-test-groups': 'user' }));
  });
});

describe('acl after every authentication plugin', () => {
  it('AC12 basic-auth, jwt and oauth2 callers are checked by their consumer groups', async () => {
    passed(await get('acl-basic', '/request', { authorization: `Basic ${Buffer.from('consumer2:secret2').toString('base64')}` }));
    const jwt = await new SignJWT({ iss: 'consumer2-jwt' }).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode('consumer2-jwt-secret'));
    assert.equal(passed(await get('acl-jwt', '/request', { authorization: `Bearer ${jwt}` }))['x-consumer-groups'], 'admin');
    // A token through the admin API (this gateway's one listener is plain HTTP, where the token endpoint refuses).
    const credential = (await admin('GET', '/oauth2/consumer2-app')).json();
    const service = (await admin('GET', '/services/echo')).json();
    const token = (await admin('POST', '/oauth2_tokens', { credential: { id: credential.id }, service: { id: service.id }, expires_in: 60 })).json().access_token;
    assert.equal(passed(await get('acl-oauth2', '/request', { authorization: `Bearer ${token}` }))['x-consumer-groups'], 'admin');
  });
});

describe('Kong acl: groups change through the admin API (03-invalidations)', () => {
  it('AC13 a group added lets the consumer in at once; removed, it keeps the consumer out', async () => {
    forbidden(await get('acl2', '/request?apikey=apikey123'));
    const added = await admin('POST', '/consumers/consumer1/acls', { group: 'admin' });
    assert.equal(added.status, 201, added.text);
    passed(await get('acl2', '/request?apikey=apikey123'));
    assert.equal((await admin('DELETE', '/consumers/consumer1/acls/admin')).status, 204);
    forbidden(await get('acl2', '/request?apikey=apikey123'));
  });
});

describe('Kong acl: the acls admin API (01-api)', () => {
  it('AC14 POST a group, with tags; group is required; a consumer has a group once', async () => {
    await admin('POST', '/consumers', { username: 'bob' });
    const created = await admin('POST', '/consumers/bob/acls', { group: 'admin', tags: ['tag1', 'tag2'] });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json().group, 'admin');
    assert.deepEqual(created.json().tags, ['tag1', 'tag2']);
    assert.deepEqual((await admin('POST', '/consumers/bob/acls', {})).json().fields, { group: 'required field missing' });
    assert.equal((await admin('POST', '/consumers/bob/acls', { group: 'admin' })).status, 409);
  });

  it('AC15 GET by id or by group name, under its own consumer only', async () => {
    await admin('POST', '/consumers', { username: 'alice' });
    const acl = (await admin('POST', '/consumers/bob/acls', { group: 'readers' })).json();
    for (const key of [acl.id, 'readers']) assert.equal((await admin('GET', `/consumers/bob/acls/${key}`)).json().id, acl.id);
    assert.equal((await admin('GET', `/consumers/alice/acls/${acl.id}`)).status, 404);
    assert.equal((await admin('GET', '/consumers/alice/acls/readers')).status, 404);
  });

  it('AC16 two consumers share a group name (POST or PUT) and each finds its own', async () => {
    const bobs = (await admin('POST', '/consumers/bob/acls', { group: 'shared' })).json();
    const alices = (await admin('POST', '/consumers/alice/acls', { group: 'shared' })).json();
    assert.notEqual(bobs.id, alices.id);
    assert.equal((await admin('GET', '/consumers/bob/acls/shared')).json().id, bobs.id);
    assert.equal((await admin('GET', '/consumers/alice/acls/shared')).json().id, alices.id);
    const put = await admin('PUT', '/consumers/alice/acls/put-shared', {});
    assert.equal(put.status, 200, put.text);
    assert.equal(put.json().group, 'put-shared');
    assert.equal((await admin('PUT', '/consumers/bob/acls/put-shared', {})).json().consumer.id, (await admin('GET', '/consumers/bob')).json().id);
  });

  it("AC17 PUT renames a consumer's group (upsert by id); lists page; the whole list under /acls", async () => {
    const acl = (await admin('POST', '/consumers/bob/acls', { group: 'old-name' })).json();
    const renamed = await admin('PUT', `/consumers/bob/acls/${acl.id}`, { group: 'new-name' });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal(renamed.json().id, acl.id);
    assert.equal((await admin('GET', '/consumers/bob/acls/new-name')).json().id, acl.id);
    assert.equal((await admin('GET', '/consumers/bob/acls/old-name')).status, 404);
    const page = (await admin('GET', '/consumers/bob/acls?size=2')).json();
    assert.equal(page.data.length, 2);
    assert.ok(page.next);
    assert.ok((await admin('GET', '/acls')).json().data.length >= 10);
  });

  it('AC19 a group name no header can carry is refused: it goes upstream in X-Consumer-Groups', async () => {
    await admin('POST', '/consumers', { username: 'carol' });
    for (const group of ['line\r\nbreak', 'nul\u0000', '\u65e5\u672c']) {
      const refused = await admin('POST', '/consumers/carol/acls', { group });
      assert.equal(refused.status, 400, JSON.stringify(group));
      assert.match(refused.json().fields.group, /must be usable as an HTTP header value/);
    }
  });
});

describe('Kong acl: config schema', () => {
  const load = (config: Record<string, unknown>) =>
    loadConfigText(JSON.stringify({ _format_version: '3.0', routes: [{ name: 'r', paths: ['/'], plugins: [{ name: 'acl', config }] }] }), '/tmp/acl.yaml', bundledPlugins);

  it("AC18 exactly one of allow and deny, with Kong's entity-check messages", async () => {
    const exactlyOne = "config: exactly one of these fields must be non-empty: 'config.allow', 'config.deny'";
    const atLeastOne = "config: at least one of these fields must be non-empty: 'config.allow', 'config.deny'";
    assert.deepEqual(await pluginConfigErrors('acl', { allow: ['a'], deny: ['b'] }), [exactlyOne]);
    assert.deepEqual(await pluginConfigErrors('acl', {}), [exactlyOne, atLeastOne]);
    assert.deepEqual(await pluginConfigErrors('acl', { allow: [], deny: [] }), [exactlyOne, atLeastOne]);
    assert.deepEqual(await pluginConfigErrors('acl', { allow: ['a'], deny: [] }), []);
    assert.equal(load({ allow: ['a'] }).ok, true);
  });
});
