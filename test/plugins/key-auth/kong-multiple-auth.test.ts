/**
 * Kong's multiple-authentication suites of key-auth and basic-auth (the second `describe` of
 * spec/03-plugins/09-key-auth/02-access_spec.lua and 10-basic-auth/03-access_spec.lua): both plugins on
 * one route, without `anonymous` every one must pass (logical AND), with it any one suffices and the
 * anonymous consumer stands in when none does (logical OR).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request, startGateway, startUpstream, type Reply, type TestGateway, type Upstream } from '../../helpers/gateway.ts';

const ANONYMOUS = '2b3c4d5e-0000-4000-8000-0000000a0001';
const MICKEY = '2b3c4d5e-0000-4000-8000-0000000a0002';
const ALADDIN = '2b3c4d5e-0000-4000-8000-0000000a0003';
const OPEN_SESAME = 'Basic QWxhZGRpbjpPcGVuU2VzYW1l';

let gw: TestGateway;
let upstream: Upstream;

before(async () => {
  upstream = await startUpstream();
  const both = (anonymous?: string) => [
    { name: 'basic-auth', config: anonymous ? { anonymous } : {} },
    { name: 'key-auth', config: anonymous ? { anonymous } : {} },
  ];
  gw = await startGateway({
    services: [
      {
        name: 'echo',
        url: `${upstream.url}/request`,
        routes: [
          { name: 'and', hosts: ['logical-and.test'], plugins: both() },
          { name: 'or', hosts: ['logical-or.test'], plugins: both(ANONYMOUS) },
        ],
      },
    ],
    consumers: [
      { id: ANONYMOUS, username: 'Anonymous' },
      { id: MICKEY, username: 'Mickey', keyauth_credentials: [{ key: 'Mouse' }] },
      { id: ALADDIN, username: 'Aladdin', basicauth_credentials: [{ username: 'Aladdin', password: 'OpenSesame' }] },
    ],
  });
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
});

const call = (host: string, headers: Record<string, string> = {}) => request(`${gw.http}/`, { headers: { host, ...headers } });

function upstreamHeaders(reply: Reply): Record<string, string | undefined> {
  assert.equal(reply.status, 200, reply.text);
  return reply.json().headers;
}

describe('logical AND (no anonymous)', () => {
  it('MK01 passes with both credentials: one of the two consumers, not anonymous', async () => {
    const headers = upstreamHeaders(await call('logical-and.test', { apikey: 'Mouse', authorization: OPEN_SESAME }));
    assert.equal(headers['x-anonymous-consumer'], undefined);
    assert.ok([MICKEY, ALADDIN].includes(headers['x-consumer-id']!));
  });

  it('MK02 the key only: basic-auth refuses', async () => {
    const reply = await call('logical-and.test', { apikey: 'Mouse' });
    assert.equal(reply.status, 401);
    assert.equal(reply.headers['www-authenticate'], 'Basic realm="service"');
  });

  it('MK03 the password only, or nothing: key-auth refuses first', async () => {
    for (const headers of [{ authorization: OPEN_SESAME }, {}] as Record<string, string>[]) {
      const reply = await call('logical-and.test', headers);
      assert.equal(reply.status, 401);
      assert.equal(reply.headers['www-authenticate'], 'Key');
    }
  });
});

describe('logical OR (anonymous on both)', () => {
  it('MK04 both credentials: key-auth (first) tells who, basic-auth lets it be', async () => {
    const headers = upstreamHeaders(await call('logical-or.test', { apikey: 'Mouse', authorization: OPEN_SESAME }));
    assert.equal(headers['x-anonymous-consumer'], undefined);
    assert.equal(headers['x-consumer-id'], MICKEY);
  });

  it('MK05 either credential alone', async () => {
    assert.equal(upstreamHeaders(await call('logical-or.test', { apikey: 'Mouse' }))['x-consumer-id'], MICKEY);
    const aladdin = upstreamHeaders(await call('logical-or.test', { authorization: OPEN_SESAME }));
    assert.equal(aladdin['x-consumer-id'], ALADDIN);
    assert.equal(aladdin['x-credential-identifier'], 'Aladdin');
    assert.equal(aladdin['x-anonymous-consumer'], undefined);
  });

  it('MK06 nothing: the anonymous consumer', async () => {
    const headers = upstreamHeaders(await call('logical-or.test'));
    assert.equal(headers['x-anonymous-consumer'], 'true');
    assert.equal(headers['x-consumer-id'], ANONYMOUS);
    assert.equal(headers['x-credential-identifier'], undefined);
  });
});
