/**
 * Kong's session cases (spec/03-plugins/30-session/01-access, 02-kong_storage_adapter, 03-session) against a
 * real gateway and upstream: the cookie key-auth's caller gets (its name and attributes, the persistent
 * cookie), the cookie as authentication in place of the key, the identity headers it restores, the groups
 * it keeps, logout by query and by body, Kong's storage revoking a logged-out cookie; and what a client
 * cannot do: alter, move or oversize a cookie, or outlive a timeout.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bundledPlugins } from '../../../src/plugins.ts';
import type { PluginDefinition } from '../../../src/pdk/index.ts';
import { aroundTests, request, startGateway, startUpstream, type Reply, type RequestOptions } from '../../helpers/gateway.ts';
import { startWithRegistry, waitFor } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';

const REMEMBER_ROLLING_TIMEOUT = 3600;
const KEY = 'kong';

function route(name: string, session: Record<string, unknown> = {}, extra: Record<string, unknown>[] = []) {
  return {
    name,
    paths: [`/${name}`],
    plugins: [{ name: 'session', config: session }, { name: 'key-auth', config: { anonymous: 'anon' } }, ...extra],
  };
}

function config(upstreamUrl: string, cookieUpstreamUrl: string): Record<string, any> {
  process.env.TOLLGATE_TEST_SESSION_SECRET = 'a secret from the vault';
  return {
    services: [
      {
        name: 'echo',
        url: upstreamUrl,
        routes: [
          route('test1'),
          route('test2', { cookie_name: 'da_cookie', cookie_same_site: 'Lax', cookie_http_only: false, cookie_secure: false }),
          route('test5', { remember: true, remember_rolling_timeout: REMEMBER_ROLLING_TIMEOUT }),
          route('body-logout', { read_body_for_logout: true, logout_methods: ['POST', 'DELETE', 'GET'] }),
          route('kong-storage', { storage: 'kong' }),
          route('other-audience', { audience: 'other' }),
          route('short', { absolute_timeout: 1 }),
          route('rolling', { rolling_timeout: 4, storage: 'kong' }),
          route('described', { response_headers: ['id', 'audience', 'subject', 'absolute-timeout'], request_headers: ['subject', 'timeout'] }),
          route('vaulted', { secret: '{vault://env/tollgate_test_session_secret}' }),
        ],
      },
      { name: 'cookie-setting', url: cookieUpstreamUrl, routes: [route('upstream-cookie')] },
    ],
    consumers: [
      { username: 'coop', keyauth_credentials: [{ key: KEY }] },
      { username: 'anon', plugins: [{ name: 'request-termination', config: { status_code: 403, message: 'So it goes.' } }] },
    ],
  };
}

/** Every cookie of an answer, as `name=value`, without attributes: what a client sends back. */
function cookiesOf(reply: Reply): string {
  return ([] as string[]).concat(reply.headers['set-cookie'] ?? []).map((c) => c.split(';')[0]).join('; ');
}

function setCookies(reply: Reply): string[] {
  return ([] as string[]).concat(reply.headers['set-cookie'] ?? []);
}

describe('Kong session', () => {
  const fx = aroundTests(async () => {
    const upstream = await startUpstream();
    const cookieUpstream = await startUpstream((_, res) => res.writeHead(200, { 'set-cookie': 'theme=dark; Path=/' }).end('{}'));
    const gw = await startGateway(config(upstream.url, cookieUpstream.url));
    return {
      gw,
      async close() {
        await gw.stop();
        await upstream.close();
        await cookieUpstream.close();
      },
    };
  });

  const proxy = (path: string, options: RequestOptions = {}) => request(fx.gw.http + path, options);
  /** Signs in with the key on `path`, and returns the session cookies the answer set. */
  const signIn = async (path: string): Promise<Reply> => {
    const reply = await proxy(path, { headers: { apikey: KEY } });
    assert.equal(reply.status, 200, reply.text);
    return reply;
  };

  it('SE01 key-auth\'s caller gets a `session` cookie: Path=/; SameSite=Strict; Secure; HttpOnly', async () => {
    const [cookie] = setCookies(await signIn('/test1/status/200'));
    const parts = cookie.split('; ');
    assert.equal(parts[0].split('=')[0], 'session');
    assert.deepEqual(parts.slice(1), ['Path=/', 'SameSite=Strict', 'Secure', 'HttpOnly']);
  });

  it('SE02 the cookie authenticates in place of the key; the anonymous caller is refused; no cookie for it', async () => {
    const anonymous = await proxy('/test2/request');
    assert.equal(anonymous.status, 403);
    assert.equal(anonymous.headers['set-cookie'], undefined);
    const signedIn = await signIn('/test2/request');
    const [cookie] = setCookies(signedIn);
    assert.equal(cookie.split('=')[0], 'da_cookie');
    assert.deepEqual(cookie.split('; ').slice(1), ['Path=/', 'SameSite=Lax']);
    for (let i = 0; i < 4; i++) {
      // Several requests: on a node of workers, every process opens the session.
      const reply = await proxy('/test2/request', { headers: { cookie: cookiesOf(signedIn) } });
      assert.equal(reply.status, 200, reply.text);
      assert.equal(reply.headers['set-cookie'], undefined, 'a fresh session is not sent again');
    }
  });

  it('SE03 remember: a persistent cookie beside the session one (Expires, Max-Age), which alone reopens the session', async () => {
    const signedIn = await signIn('/test5/status/200');
    const [session, remember] = setCookies(signedIn);
    assert.equal(session.split('=')[0], 'session');
    const parts = remember.split('; ');
    assert.equal(parts[0].split('=')[0], 'remember');
    assert.deepEqual(parts.slice(1, 5), ['Path=/', 'SameSite=Strict', 'Secure', 'HttpOnly']);
    assert.match(parts[5], /^Expires=/);
    assert.equal(parts[6], `Max-Age=${REMEMBER_ROLLING_TIMEOUT}`);
    const reopened = await proxy('/test5/request', { headers: { cookie: remember.split(';')[0] } });
    assert.equal(reopened.status, 200, reopened.text);
    assert.deepEqual(setCookies(reopened).map((c) => c.split('=')[0]), ['session', 'remember']);
  });

  it('SE04 the session restores the consumer headers; the credential is the key-auth credential\'s id', async () => {
    const signedIn = await signIn('/test1/request');
    const byKey = signedIn.json().headers;
    const bySession = (await proxy('/test1/request', { headers: { cookie: cookiesOf(signedIn), 'x-consumer-custom-id': 'forged' } })).json().headers;
    assert.equal(bySession['x-consumer-id'], byKey['x-consumer-id']);
    assert.equal(bySession['x-consumer-username'], 'coop');
    assert.equal(bySession['x-credential-identifier'], byKey['x-credential-identifier']);
    assert.equal(bySession['x-anonymous-consumer'], undefined);
    assert.equal(bySession['x-consumer-custom-id'], undefined);
    assert.equal(bySession['x-authenticated-groups'], undefined);
  });

  it('SE05 logout: DELETE or POST with ?session_logout answers 200 and clears the cookie; GET does not log out by default', async () => {
    const cookie = cookiesOf(await signIn('/test1/request'));
    const get = await proxy('/test1/request?session_logout', { headers: { cookie } });
    assert.equal(get.status, 200);
    assert.equal(get.json().path, '/request', 'a GET goes upstream');
    const logout = await proxy('/test1/request?session_logout', { method: 'DELETE', headers: { cookie } });
    assert.equal(logout.status, 200);
    assert.equal(logout.text, '');
    assert.match(setCookies(logout)[0], /^session=; Path=\/; SameSite=Strict; Secure; HttpOnly; Expires=Thu, 01 Jan 1970 00:00:01 GMT; Max-Age=0$/);
    const post = await proxy('/test1/request?session_logout', { method: 'POST', headers: { cookie: cookiesOf(await signIn('/test1/request')) } });
    assert.equal(post.status, 200);
    assert.equal(post.text, '');
  });

  it('SE06 logout by body argument only with read_body_for_logout, and only for the methods allowed', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const notRead = await proxy('/test1/request', { method: 'POST', body: 'session_logout=true', headers: { ...form, cookie: cookiesOf(await signIn('/test1/request')) } });
    assert.equal(notRead.json().path, '/request', 'the body is not read for logout by default');
    const cookie = cookiesOf(await signIn('/body-logout/request'));
    const read = await proxy('/body-logout/request', { method: 'POST', body: 'session_logout=true', headers: { ...form, cookie } });
    assert.equal(read.status, 200);
    assert.equal(read.text, '');
    assert.match(setCookies(read)[0], /^session=;/);
  });

  it('SE07 storage kong: a logged-out cookie is refused everywhere; with cookie storage its copy lives until it expires', async () => {
    const kept = cookiesOf(await signIn('/kong-storage/request'));
    assert.equal((await proxy('/kong-storage/request', { headers: { cookie: kept } })).status, 200);
    assert.equal((await proxy('/kong-storage/request?session_logout', { method: 'POST', headers: { cookie: kept } })).status, 200);
    for (let i = 0; i < 4; i++) assert.equal((await proxy('/kong-storage/request', { headers: { cookie: kept } })).status, 403);
    const copied = cookiesOf(await signIn('/test1/request'));
    assert.equal((await proxy('/test1/request?session_logout', { method: 'POST', headers: { cookie: copied } })).status, 200);
    assert.equal((await proxy('/test1/request', { headers: { cookie: copied } })).status, 200);
  });

  it('SE08 a cookie altered, sealed for another audience, or oversized is no session', async () => {
    const cookie = cookiesOf(await signIn('/test1/request'));
    const value = cookie.slice('session='.length);
    const altered = `session=${value.slice(0, -2)}${value.endsWith('AA') ? 'BB' : 'AA'}`;
    assert.equal((await proxy('/test1/request', { headers: { cookie: altered } })).status, 403);
    assert.equal((await proxy('/other-audience/request', { headers: { cookie } })).status, 403);
    assert.equal((await proxy('/test1/request', { headers: { cookie: `session=${'A'.repeat(5000)}` } })).status, 403);
    assert.equal((await proxy('/vaulted/request', { headers: { cookie } })).status, 403, 'another secret');
    const vaulted = cookiesOf(await signIn('/vaulted/request'));
    assert.equal((await proxy('/vaulted/request', { headers: { cookie: vaulted } })).status, 200);
  });

  it('SE09 a session ends with its absolute timeout', async () => {
    const cookie = cookiesOf(await signIn('/short/request'));
    assert.equal((await proxy('/short/request', { headers: { cookie } })).status, 200);
    await waitFor(async () => (await proxy('/short/request', { headers: { cookie } })).status === 403, 'the session to expire');
  });

  it('SE14 a session in use is renewed (02-kong_storage_adapter "renews cookie"): the new cookie outlives the first', async () => {
    const first = cookiesOf(await signIn('/rolling/request'));
    let current = first;
    const renewed = await waitFor(
      async () => {
        const reply = await proxy('/rolling/request', { headers: { cookie: current } });
        assert.equal(reply.status, 200, reply.text);
        if (reply.headers['set-cookie']) current = cookiesOf(reply);
        return current !== first;
      },
      'a renewed cookie',
      10_000,
    );
    assert.ok(renewed);
    await waitFor(async () => (await proxy('/rolling/request', { headers: { cookie: first } })).status === 403, 'the first cookie to expire', 10_000);
    assert.equal((await proxy('/rolling/request', { headers: { cookie: current } })).status, 200);
  });

  it('SE10 the Session-* headers: to the client and to the upstream, as configured', async () => {
    const signedIn = await signIn('/described/request');
    assert.match(String(signedIn.headers['session-id']), /^[A-Za-z0-9_-]{43}$/);
    assert.equal(signedIn.headers['session-audience'], 'default');
    assert.equal(signedIn.headers['session-subject'], 'coop');
    assert.ok(Number(signedIn.headers['session-absolute-timeout']) > 86000);
    const upstream = (await proxy('/described/request', { headers: { cookie: cookiesOf(signedIn) } })).json().headers;
    assert.equal(upstream['session-subject'], 'coop');
    assert.ok(Number(upstream['session-timeout']) > 0);
    assert.equal(upstream['session-id'], undefined);
  });

  it("SE11 the upstream's own Set-Cookie goes downstream beside the session's", async () => {
    const reply = await signIn('/upstream-cookie/anything');
    assert.deepEqual(setCookies(reply).map((c) => c.split('=')[0]), ['theme', 'session']);
  });
});

describe('Kong session: groups (01-access, with a ctx-checker)', () => {
  /** Kong's ctx-checker fixture: vouches for groups, as an authentication plugin with groups does. */
  const groupsVoucher: PluginDefinition<Record<string, never>> = {
    name: 'ctx-checker',
    version: '1.0.0',
    priority: 1000,
    configSchema: { type: 'record', fields: {} },
    create: () => ({
      access(ctx) {
        ctx.shared.authenticated_groups ??= ['agents', 'doubleagents'];
      },
    }),
  };

  const fx = aroundTests(async () => {
    const upstream = await startUpstream();
    const gw = await startWithRegistry(
      {
        services: [{ name: 'echo', url: upstream.url, routes: [{ name: 'headers', paths: ['/headers'], plugins: [{ name: 'session' }, { name: 'key-auth' }, { name: 'ctx-checker' }] }] }],
        consumers: [{ username: 'coop', keyauth_credentials: [{ key: KEY }] }],
      },
      new Map([...bundledPlugins, ['ctx-checker', groupsVoucher as PluginDefinition]]),
    );
    return {
      gw,
      async close() {
        await gw.stop();
        await upstream.close();
      },
    };
  });

  it('SE12 the groups vouched for at sign-in come back from the session', async () => {
    const signedIn = await request(`${fx.gw.http}/headers/request`, { headers: { apikey: KEY } });
    assert.equal(signedIn.status, 200, signedIn.text);
    const cookie = cookiesOf(signedIn);
    // The key is needed on every request here (key-auth without anonymous): what is checked is the groups' source.
    const reply = await request(`${fx.gw.http}/headers/request`, { headers: { apikey: KEY, cookie } });
    assert.equal(reply.json().headers['x-authenticated-groups'], 'agents, doubleagents');
  });
});

describe('Kong session: config schema', () => {
  it("SE13 Kong's defaults load; one_of fields refuse other values", async () => {
    assert.deepEqual(await pluginConfigErrors('session', {}), []);
    assert.deepEqual(await pluginConfigErrors('session', { storage: 'redis', cookie_same_site: 'Sometimes' }), [
      'config.storage: expected one of: cookie, kong',
      'config.cookie_same_site: expected one of: Strict, Lax, None, Default',
    ]);
    assert.equal((await pluginConfigErrors('session', {}, { consumer: 'someone' })).length, 1);
  });
});
