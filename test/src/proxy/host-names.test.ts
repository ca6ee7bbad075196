/**
 * Host names are compared in one form wherever routing looks at them: Host, h2 `:authority` and an
 * absolute-form target's authority, against route `hosts` (exact and wildcard): lowercase and without the
 * trailing dot of a fully qualified name. `secure.example.` is `secure.example` (as DNS, TLS SNI and
 * nginx treat it), so it cannot slip past the route that protects `secure.example` onto an open one;
 * a Host that is no host name at all (`secure.example..`, `user@host`) is a 400, as nginx answers.
 */
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { after, before, test } from 'node:test';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { portOf, rawRequest } from '../../helpers/support.ts';

let gw: TestGateway;
let echo: Upstream;

before(async () => {
  echo = await startUpstream();
  const protect = { name: 'oauth2', config: { enable_client_credentials: true } };
  gw = await startGateway({
    services: [
      {
        name: 'echo',
        url: echo.url,
        routes: [
          { name: 'secure', hosts: ['secure.example'], plugins: [protect] },
          { name: 'wild', hosts: ['*.wild.example', 'prefix.*'], paths: ['/'], plugins: [protect] },
          { name: 'open', paths: ['/'] },
        ],
      },
    ],
  });
});
after(async () => {
  await gw?.stop();
  await echo?.close();
});

const get = (host: string, target = '/x') => rawRequest(portOf(gw.http), [`GET ${target} HTTP/1.1`, `Host: ${host}`]);

test('a trailing dot or another case in Host reaches the route of that name (the protected one), never the open route', async () => {
  for (const host of ['secure.example', 'secure.example.', 'SECURE.Example.', `secure.example.:${portOf(gw.http)}`, 'a.wild.example.', 'prefix.example.']) {
    assert.equal((await get(host)).status, 401, host);
  }
  assert.equal((await get('open.example.')).status, 200);
});

test('an absolute-form target and an h2 :authority with a trailing dot are routed the same way', async () => {
  assert.equal((await get('other.example', 'http://secure.example./x')).status, 401);
  const session = http2.connect(gw.h2c);
  try {
    const status = await new Promise<number>((resolve, reject) => {
      const stream = session.request({ ':method': 'GET', ':path': '/x', ':authority': 'Secure.Example.' }, { endStream: true });
      stream.on('response', (headers) => resolve(Number(headers[':status'])));
      stream.on('error', reject);
      stream.resume();
    });
    assert.equal(status, 401);
  } finally {
    session.close();
  }
});

test('the upstream learns the canonical host in X-Forwarded-Host', async () => {
  const reply = await request(`${gw.http}/x`, { headers: { host: 'Open.Example.' } });
  assert.equal(reply.status, 200);
  assert.equal(reply.json().headers['x-forwarded-host'], 'open.example');
});

test('a Host that is not a host name is refused with 400, not routed', async () => {
  for (const host of ['secure.example..', 'user@secure.example', 'secure.example/x', 'secure.example:80x', '.']) {
    const reply = await get(host);
    assert.equal(reply.status, 400, host);
    assert.match(reply.body, /"message":"Bad Request: invalid Host header"/, host);
  }
});
