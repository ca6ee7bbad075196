/**
 * Request bodies before authentication: no work proportional to what an anonymous client sends. A body
 * too large to hold parameters is never read on a protected route (the token is then missing, as in Kong,
 * which cannot read a body nginx spilled to disk), yet an authenticated request's large body still reaches
 * the upstream whole and untouched. The token, authorize, introspect and revoke endpoints refuse such
 * bodies with 413 without reading them, and more than Kong's 100 parameters with 400.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { gatewayOnEchoUpstreamAroundTests, request, startGateway, type Reply } from '../../helpers/gateway.ts';
import { parseRaw, portOf, rawExchange } from '../../helpers/support.ts';

const CLIENT = { client_id: 'acme-app', client_secret: 'acme-secret' };
const FORM = 'application/x-www-form-urlencoded';
/** Larger than any body parameters are read from (16 KiB), far below the gateway's body limit. */
const LARGE = 1024 * 1024;

function oauth2(extra: Record<string, unknown> = {}) {
  return { name: 'oauth2', config: { enable_client_credentials: true, provision_key: 'pk', ...extra } };
}

const fx = gatewayOnEchoUpstreamAroundTests((upstreamUrl) => ({
  services: [
    { name: 'plain', url: upstreamUrl, routes: [{ name: 'plain', paths: ['/plain'], plugins: [oauth2()] }] },
    { name: 'hidden', url: upstreamUrl, routes: [{ name: 'hidden', paths: ['/hidden'], plugins: [oauth2({ hide_credentials: true })] }] },
  ],
  consumers: [{ username: 'acme', oauth2_credentials: [{ name: 'Acme', ...CLIENT }] }],
}));

async function tokenFor(service: string): Promise<string> {
  const res = await request(`${fx.gw.https}/${service}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': FORM },
    body: new URLSearchParams({ grant_type: 'client_credentials', ...CLIENT }).toString(),
  });
  assert.equal(res.status, 200, res.text);
  return res.json().access_token;
}

/** A form body of `size` bytes that holds no token. */
function largeForm(size = LARGE): string {
  const prefix = 'upload=';
  return prefix + 'x'.repeat(size - prefix.length);
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** Sends only the request head (and `start` of the body) and reads what the gateway answers meanwhile. */
async function headOnly(url: string, head: string[], start = '', tls = false) {
  const raw = await rawExchange(portOf(url), [...head, '', start].join('\r\n'), 1500, { tls });
  return parseRaw(raw);
}

function assertMissingToken(reply: { status: number; body: string }): void {
  assert.equal(reply.status, 401, reply.body);
  assert.equal(JSON.parse(reply.body).error_description, 'The access token is missing');
}

describe('protected routes do not read a body too large to hold parameters', () => {
  it('a form declared 128 MiB is answered at once as without a token, none of it awaited', async () => {
    const reply = await headOnly(fx.gw.http, ['POST /plain/upload HTTP/1.1', 'Host: x', `Content-Type: ${FORM}`, `Content-Length: ${128 * 1024 * 1024}`], 'access_token=');
    assertMissingToken(reply);
  });

  it('a chunked form is read only until it proves too large', async () => {
    const chunk = 'x'.repeat(64 * 1024);
    const start = `${chunk.length.toString(16)}\r\n${chunk}\r\n`;
    const reply = await headOnly(fx.gw.http, ['POST /plain/upload HTTP/1.1', 'Host: x', `Content-Type: ${FORM}`, 'Transfer-Encoding: chunked'], start);
    assertMissingToken(reply);
  });

  it('after answering a chunked form it read only in part, the gateway serves the next request on that connection', async () => {
    const chunk = 'x'.repeat(64 * 1024);
    const chunks = `${chunk.length.toString(16)}\r\n${chunk}\r\n`.repeat(32);
    const first = ['POST /plain/upload HTTP/1.1', 'Host: x', `Content-Type: ${FORM}`, 'Transfer-Encoding: chunked', '', `${chunks}0\r\n\r\n`].join('\r\n');
    const second = ['GET /plain/next HTTP/1.1', 'Host: x', 'Connection: close', '', ''].join('\r\n');
    const raw = await rawExchange(portOf(fx.gw.http), first + second);
    const statuses = [...raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    assert.deepEqual(statuses, [401, 401], raw.slice(0, 300));
  });

  it('a token in a form body within the limit still authenticates', async () => {
    const token = await tokenFor('plain');
    const res = await request(`${fx.gw.http}/plain/f`, { method: 'POST', headers: { 'content-type': FORM }, body: `a=1&access_token=${token}` });
    assert.equal(res.status, 200, res.text);
  });

  it('a large body of a request authenticated by its header goes upstream untouched', async () => {
    const token = await tokenFor('plain');
    const body = largeForm();
    const res = await request(`${fx.gw.http}/plain/upload`, { method: 'POST', headers: { 'content-type': FORM, authorization: `Bearer ${token}` }, body });
    assert.equal(res.status, 200, res.text);
    assert.equal(sha256(fx.upstream.requests.at(-1)!.body), sha256(body));
  });

  it('with hide_credentials and the token in the query, a large chunked body goes upstream untouched', async () => {
    const token = await tokenFor('hidden');
    const body = largeForm();
    const res = await request(`${fx.gw.http}/hidden/upload?access_token=${token}&keep=1`, {
      method: 'POST',
      headers: { 'content-type': FORM, 'transfer-encoding': 'chunked' },
      body,
    });
    assert.equal(res.status, 200, res.text);
    const seen = fx.upstream.requests.at(-1)!;
    assert.equal(seen.query, 'keep=1');
    assert.equal(seen.body.length, body.length);
    assert.equal(sha256(seen.body), sha256(body));
  });

  it('a large chunked JSON body is still read whole by a plugin that asks for it after the token check', async () => {
    // The anonymous fallback lets the request through; the upstream then sees every byte, the first
    // 16 KiB (read while looking for a token) included.
    const anonymous = await startGateway({
      services: [{ name: 'anon', url: fx.upstream.url, routes: [{ name: 'anon', paths: ['/anon'], plugins: [oauth2({ anonymous: 'guest' })] }] }],
      consumers: [{ username: 'guest' }],
    });
    try {
      const body = JSON.stringify({ data: 'y'.repeat(LARGE) });
      const res = await request(`${anonymous.http}/anon/x`, { method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, body });
      assert.equal(res.status, 200, res.text);
      assert.equal(sha256(fx.upstream.requests.at(-1)!.body), sha256(body));
      assert.equal(fx.upstream.requests.at(-1)!.headers['x-anonymous-consumer'], 'true');
    } finally {
      await anonymous.stop();
    }
  });
});

describe('the endpoints refuse parameter bodies they will not read', () => {
  for (const endpoint of ['token', 'authorize', 'introspect', 'revoke']) {
    it(`${endpoint}: a body declared 10 MB gets 413 without being awaited`, async () => {
      const reply = await headOnly(
        fx.gw.https,
        [`POST /plain/oauth2/${endpoint} HTTP/1.1`, 'Host: x', `Content-Type: ${FORM}`, `Content-Length: ${10 * 1024 * 1024}`],
        'grant_type=',
        true,
      );
      assert.equal(reply.status, 413, reply.body);
      assert.equal(JSON.parse(reply.body).error, 'invalid_request');
    });
  }

  it('a body just over 16 KiB is refused with 413, one within it is read', async () => {
    const params = new URLSearchParams({ grant_type: 'client_credentials', ...CLIENT });
    const within = `${params}&state=${'s'.repeat(16 * 1024 - params.toString().length - 7)}`;
    assert.equal(within.length, 16 * 1024);
    const ok = await request(`${fx.gw.https}/plain/oauth2/token`, { method: 'POST', headers: { 'content-type': FORM }, body: within });
    assert.equal(ok.status, 200, ok.text);
    const over = await request(`${fx.gw.https}/plain/oauth2/token`, { method: 'POST', headers: { 'content-type': FORM }, body: within + 's' });
    assertLimitError(over, 413, /16384 bytes/);
  });

  it('more than 100 parameters in a form, a JSON object, a multipart body or the query get 400', async () => {
    const padding = (n: number) => Array.from({ length: n }, (_, i) => [`p${i}`, 'v']);
    const base = Object.entries({ grant_type: 'client_credentials', ...CLIENT });
    const url = `${fx.gw.https}/plain/oauth2/token`;

    const hundred = new URLSearchParams([...base, ...padding(100 - base.length)]).toString();
    assert.equal((await request(url, { method: 'POST', headers: { 'content-type': FORM }, body: hundred })).status, 200);
    assertLimitError(await request(url, { method: 'POST', headers: { 'content-type': FORM }, body: `${hundred}&one=more` }), 400, /At most 100 parameters/);

    const json = Object.fromEntries([...base, ...padding(101 - base.length)]);
    assertLimitError(await request(url, { method: 'POST', body: json }), 400, /At most 100 parameters/);

    const form = new FormData();
    for (const [key, value] of [...base, ...padding(101 - base.length)]) form.append(key, value);
    const multipart = new Response(form);
    const body = Buffer.from(await multipart.arrayBuffer());
    assertLimitError(await request(url, { method: 'POST', headers: { 'content-type': multipart.headers.get('content-type')! }, body }), 400, /At most 100 parameters/);

    const query = new URLSearchParams(padding(101)).toString();
    assertLimitError(await request(`${url}?${query}`, { method: 'POST', headers: { 'content-type': FORM }, body: new URLSearchParams(base).toString() }), 400, /At most 100 parameters/);
  });
});

function assertLimitError(res: Reply, status: number, description: RegExp): void {
  assert.equal(res.status, status, res.text);
  assert.equal(res.json().error, 'invalid_request');
  assert.match(res.json().error_description, description);
  assert.equal(res.headers['cache-control'], 'no-store');
}
