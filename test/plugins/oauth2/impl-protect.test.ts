/**
 * Protected routes end to end: where tokens are read from, hide_credentials, anonymous (by id and by
 * username), global_credentials across services, realm challenges, gRPC-shaped refusals, and
 * credentials declared at the top level of gateway.yaml.
 */
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { describe, it } from 'node:test';
import { gatewayOnEchoUpstreamAroundTests, request, type Reply } from '../../helpers/gateway.ts';

const ANONYMOUS_ID = '0b9d6f5e-1111-4222-8333-444455556666';
const BASE = { enable_client_credentials: true, scopes: ['read'], provision_key: 'pk' };

function service(name: string, upstreamUrl: string, config: Record<string, unknown>): Record<string, any> {
  return { name, url: upstreamUrl, routes: [{ name, paths: [`/${name}`], plugins: [{ name: 'oauth2', config: { ...BASE, ...config } }] }] };
}

const fx = gatewayOnEchoUpstreamAroundTests((upstreamUrl) => ({
  services: [
    service('plain', upstreamUrl, {}),
    service('hidden', upstreamUrl, { hide_credentials: true, auth_header_name: 'x_api_token' }),
    service('capitals', upstreamUrl, { auth_header_name: 'Authorization' }),
    service('anon-id', upstreamUrl, { anonymous: ANONYMOUS_ID }),
    service('anon-name', upstreamUrl, { anonymous: 'guest' }),
    service('global-a', upstreamUrl, { global_credentials: true }),
    service('global-b', upstreamUrl, { global_credentials: true, realm: 'api' }),
    service('quoted-realm', upstreamUrl, { realm: 'the "api" \\ zone' }),
  ],
  consumers: [
    { id: ANONYMOUS_ID, username: 'guest' },
    { username: 'acme' },
  ],
  oauth2_credentials: [{ consumer: 'acme', name: 'Top-level App', client_id: 'top-app', client_secret: 'top-secret' }],
}));

async function tokenFor(name: string): Promise<string> {
  const res = await request(`${fx.gw.https}/${name}/oauth2/token`, {
    method: 'POST',
    body: { grant_type: 'client_credentials', client_id: 'top-app', client_secret: 'top-secret', scope: 'read' },
  });
  assert.equal(res.status, 200, res.text);
  return res.json().access_token;
}

function lastUpstream() {
  return fx.upstream.requests.at(-1)!;
}

describe('where the token comes from', () => {
  it('a top-level credential (consumer by username) gets tokens; query and form body carry them too', async () => {
    const token = await tokenFor('plain');
    assert.equal((await request(`${fx.gw.http}/plain/q?access_token=${token}&keep=1`)).status, 200);
    assert.match(lastUpstream().query, /access_token=/);
    const form = await request(`${fx.gw.http}/plain/f`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `a=1&access_token=${token}`,
    });
    assert.equal(form.status, 200, form.text);
    assert.equal(lastUpstream().body, `a=1&access_token=${token}`);
    assert.equal(lastUpstream().headers['x-consumer-username'], 'acme');
  });
});

describe('auth_header_name', () => {
  it('matches header names case-insensitively', async () => {
    const token = await tokenFor('capitals');
    assert.equal((await request(`${fx.gw.http}/capitals/x`, { headers: { authorization: `Bearer ${token}` } })).status, 200);
  });
});

describe('hide_credentials', () => {
  it('strips the token from a custom header (underscores and dashes alike), the query and a form body', async () => {
    const token = await tokenFor('hidden');
    assert.equal((await request(`${fx.gw.http}/hidden/h`, { headers: { 'x-api-token': `Bearer ${token}` } })).status, 200);
    assert.equal(lastUpstream().headers['x-api-token'], undefined);
    assert.equal((await request(`${fx.gw.http}/hidden/q?keep=1&access_token=${token}`)).status, 200);
    assert.equal(lastUpstream().query, 'keep=1');
    const form = await request(`${fx.gw.http}/hidden/f`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `access_token=${token}&a=1`,
    });
    assert.equal(form.status, 200, form.text);
    assert.equal(lastUpstream().body, 'a=1');
  });
});

describe('anonymous', () => {
  for (const name of ['anon-id', 'anon-name']) {
    it(`${name}: no or bad token passes as the anonymous consumer; a good token as the real one`, async () => {
      for (const headers of [{}, { authorization: 'Bearer nonsense' }]) {
        const res = await request(`${fx.gw.http}/${name}/x`, { headers: { ...headers, 'x-credential-identifier': 'spoof', 'x-authenticated-scope': 'admin' } });
        assert.equal(res.status, 200, res.text);
        const seen = lastUpstream().headers;
        assert.equal(seen['x-anonymous-consumer'], 'true');
        assert.equal(seen['x-consumer-id'], ANONYMOUS_ID);
        assert.equal(seen['x-consumer-username'], 'guest');
        assert.equal(seen['x-credential-identifier'], undefined);
        assert.equal(seen['x-authenticated-scope'], undefined);
      }
      const token = await tokenFor(name);
      assert.equal((await request(`${fx.gw.http}/${name}/x`, { headers: { authorization: `Bearer ${token}` } })).status, 200);
      assert.equal(lastUpstream().headers['x-consumer-username'], 'acme');
      assert.equal(lastUpstream().headers['x-anonymous-consumer'], undefined);
    });
  }
});

describe('global_credentials', () => {
  it('a global token works on every global plugin, not on a service-bound one', async () => {
    const token = await tokenFor('global-a');
    const call = (name: string): Promise<Reply> => request(`${fx.gw.http}/${name}/x`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal((await call('global-a')).status, 200);
    assert.equal((await call('global-b')).status, 200);
    const local = await call('plain');
    assert.equal(local.status, 401);
    assert.equal(local.json().error_description, "The access token is global, but the current plugin is configured without 'global_credentials'");
  });

  it('a service-bound token is refused by a global plugin of another service, with the realm', async () => {
    const token = await tokenFor('plain');
    const res = await request(`${fx.gw.http}/global-b/x`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(res.status, 401);
    assert.equal(res.headers['www-authenticate'], 'Bearer realm="api", error="invalid_token", error_description="The access token is invalid or has expired"');
    const missing = await request(`${fx.gw.http}/global-b/x`);
    assert.equal(missing.headers['www-authenticate'], 'Bearer realm="api"');
    assert.deepEqual(missing.json(), { error: 'invalid_request', error_description: 'The access token is missing' });
  });
});

describe('WWW-Authenticate', () => {
  it('escapes quotes and backslashes of the realm inside its quoted-string (RFC 9110 §5.6.4)', async () => {
    const res = await request(`${fx.gw.http}/quoted-realm/x`);
    assert.equal(res.status, 401);
    assert.equal(res.headers['www-authenticate'], 'Bearer realm="the \\"api\\" \\\\ zone"');
  });
});

describe('gRPC', () => {
  /** A gRPC call's response headers and trailers, merged. */
  async function grpcCall(path: string, method = 'POST'): Promise<http2.IncomingHttpHeaders> {
    const session = http2.connect(fx.gw.h2c);
    try {
      return await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
        const stream = session.request({ ':method': method, ':path': path, 'content-type': 'application/grpc', te: 'trailers' }, { endStream: method === 'GET' });
        let merged: http2.IncomingHttpHeaders = {};
        stream.on('response', (h) => (merged = { ...merged, ...h }));
        stream.on('trailers', (t) => (merged = { ...merged, ...t }));
        stream.on('end', () => resolve(merged));
        stream.on('error', reject);
        stream.resume();
        if (method !== 'GET') stream.end(Buffer.alloc(5));
      });
    } finally {
      session.close();
    }
  }

  it('a gRPC request without a token gets UNAUTHENTICATED (16)', async () => {
    const headers = await grpcCall('/plain/pkg.Service/Call');
    assert.equal(headers['grpc-status'], '16');
    assert.match(String(headers['grpc-message']), /access token is missing/);
  });

  it('a plugin answering a gRPC-content request no route matched (the metadata location, a GET) answers it gRPC-shaped, never JSON', async () => {
    const headers = await grpcCall('/.well-known/oauth-authorization-server/plain', 'GET');
    assert.equal(headers[':status'], 200);
    assert.equal(headers['content-type'], 'application/grpc');
    assert.equal(headers['grpc-status'], '0');
  });
});
