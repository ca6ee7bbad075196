/**
 * Values the gateway sends upstream as headers are refused where they are set, not discovered where they
 * are used: a token whose authenticated_userid holds CR/LF (or characters Node cannot send, or outer
 * whitespace an upstream would trim into another user's name) is never issued, by any grant or by the
 * admin API; consumers, credentials and scopes with such values are refused when created or configured.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import oauth2 from '../../../plugins/oauth2/index.ts';
import { validate } from '../../../src/pdk/index.ts';
import { gatewayOnEchoUpstreamAroundTests, request, type Reply } from '../../helpers/gateway.ts';

const CALLBACK = 'https://app.example/cb';
const CLIENT = { client_id: 'acme-app', client_secret: 'acme-secret' };
const OAUTH = { enable_client_credentials: true, enable_authorization_code: true, enable_password_grant: true, provision_key: 'pk', scopes: ['read'] };
/** Each cannot travel upstream as it is: a header injection, a character above U+00FF, trimmed spaces. */
const UNSENDABLE = ['evil\r\nInjected: yes', 'nul\u0000byte', '用户', ' admin', 'admin\t'];

const fx = gatewayOnEchoUpstreamAroundTests((upstreamUrl) => ({
  services: [{ name: 'api', url: upstreamUrl, routes: [{ name: 'api', paths: ['/api'], plugins: [{ name: 'oauth2', config: OAUTH }] }] }],
  consumers: [{ username: 'acme', oauth2_credentials: [{ name: 'Acme', ...CLIENT, redirect_uris: [CALLBACK] }] }],
}));

function post(endpoint: string, fields: Record<string, string>): Promise<Reply> {
  return request(`${fx.gw.https}/api/oauth2/${endpoint}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields).toString() });
}

const admin = (path: string, options?: Parameters<typeof request>[1]) => request(fx.gw.admin + path, options);

function assertRefusedUserId(res: Reply): void {
  assert.equal(res.status, 400, res.text);
  assert.equal(res.json().error, 'invalid_request');
  assert.match(res.json().error_description, /^authenticated_userid must be usable as an HTTP header value/);
}

describe('authenticated_userid at issuance', () => {
  for (const userid of UNSENDABLE) {
    it(`${JSON.stringify(userid)} is refused by client_credentials, password and authorize`, async () => {
      assertRefusedUserId(await post('token', { grant_type: 'client_credentials', ...CLIENT, provision_key: 'pk', authenticated_userid: userid }));
      assertRefusedUserId(await post('token', { grant_type: 'password', ...CLIENT, provision_key: 'pk', authenticated_userid: userid, scope: 'read' }));
      assertRefusedUserId(await post('authorize', { provision_key: 'pk', authenticated_userid: userid, client_id: CLIENT.client_id, response_type: 'code', scope: 'read' }));
    });
  }

  it('inner spaces and Latin-1 letters are fine, and reach the upstream as they are', async () => {
    const issued = await post('token', { grant_type: 'client_credentials', ...CLIENT, provision_key: 'pk', authenticated_userid: 'José Müller 7' });
    assert.equal(issued.status, 200, issued.text);
    const res = await request(`${fx.gw.http}/api/x`, { headers: { authorization: `Bearer ${issued.json().access_token}` } });
    assert.equal(res.status, 200, res.text);
    assert.equal(fx.upstream.requests.at(-1)!.headers['x-authenticated-userid'], 'José Müller 7');
  });

  it('the admin API refuses such a user id or a malformed scope for a token', async () => {
    const credential = (await admin('/oauth2/acme-app')).json();
    for (const body of [{ authenticated_userid: 'evil\r\nInjected: yes' }, { scope: 'read,write' }, { scope: 'read  write' }]) {
      const res = await admin('/oauth2_tokens', { method: 'POST', body: { credential: { id: credential.id }, expires_in: 60, ...body } });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json().name, 'schema violation');
    }
  });
});

describe('other values that become headers', () => {
  it('a runtime consumer whose username or custom_id cannot be a header is refused', async () => {
    for (const body of [{ username: 'evil\r\nInjected: yes' }, { username: ' acme' }, { custom_id: 'c\n1' }]) {
      const res = await admin('/consumers', { method: 'POST', body });
      assert.equal(res.status, 400, res.text);
      assert.match(res.json().message, /must be usable as an HTTP header value/);
    }
  });

  it('a credential whose client_id cannot be a header is refused', async () => {
    const res = await admin('/consumers/acme/oauth2', { method: 'POST', body: { name: 'Bad', client_id: 'app\r\nx: y' } });
    assert.equal(res.status, 400, res.text);
    assert.match(JSON.stringify(res.json().fields), /must be usable as an HTTP header value/);
  });

  it('the config refuses scopes that are no RFC 6749 scope-tokens (or hold the comma that joins them), a realm or header name that cannot be sent', () => {
    const issues = (config: Record<string, unknown>) => validate(oauth2.configSchema, { enable_client_credentials: true, ...config }).issues;
    assert.deepEqual(issues({ scopes: ['read', 'a,b', 'x y', 'q"'] }).map((i) => i.path), [['scopes', 1], ['scopes', 2], ['scopes', 3]]);
    assert.deepEqual(issues({ realm: 'api\r\nx: y' }).map((i) => i.path), [['realm']]);
    assert.deepEqual(issues({ auth_header_name: 'x token' }).map((i) => i.path), [['auth_header_name']]);
    assert.deepEqual(issues({ scopes: ['events:write', 'user.email'], realm: 'the "api"', auth_header_name: 'x_api_token' }), []);
  });
});
