/**
 * Kong's cache key, derived as kong/plugins/proxy-cache/cache_key.lua derives it (spec 05-cache_key_spec.lua
 * for its parts), checked on the X-Cache-Key a real gateway sends: the route's id (with the consumer's
 * before it once authenticated), the method, nginx's request line cut at `?`, the sorted query, the
 * configured headers; and a response the upstream cuts short is never stored.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { keyFrom, paramsKey, prefixOf } from '../../../plugins/proxy-cache/cache-key.ts';
import { startUpstream, type Upstream } from '../../helpers/gateway.ts';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe("the parts of Kong's key", () => {
  it('prefix: consumer and route, the route alone, or default', () => {
    assert.equal(prefixOf('c1', 'r1'), 'c1:r1');
    assert.equal(prefixOf(undefined, 'r1'), 'r1');
    assert.equal(prefixOf('c1', undefined), 'default');
    assert.equal(prefixOf(undefined, undefined), 'default');
  });

  it('query: every argument sorted, or the vary list in its order; repeated values sorted', () => {
    assert.equal(paramsKey({ b: '2', a: '1' }, []), 'a=1:b=2');
    assert.equal(paramsKey({}, ['a']), '');
    assert.equal(paramsKey({ a: '1', b: '2' }, ['a']), 'a=1');
    assert.equal(paramsKey({ a: ['2', '1'] }, ['a']), 'a=1,2');
    assert.equal(paramsKey({ a: ['1', '2'], b: '2' }, ['a', 'b', 'c']), 'a=1,2:b=2');
    assert.equal(paramsKey({ flag: true }, null), 'flag');
  });

  it('headers: only those named', () => {
    assert.equal(keyFrom({ a: '1', b: '2' }, ['a']), 'a=1');
    assert.equal(keyFrom({ a: ['2', '1'], b: '2' }, ['a', 'b', 'c']), 'a=1,2:b=2');
  });
});

describe('X-Cache-Key on a real gateway', () => {
  let gw: TestGateway;
  let upstream: Upstream;
  let routeId: string;
  let bobId: string;
  let cutServed = 0;

  before(async () => {
    upstream = await startUpstream((req, res) => {
      if (req.url?.startsWith('/cut')) {
        cutServed++;
        res.writeHead(200, { 'content-type': 'text/plain' });
        res.write('part of it');
        setTimeout(() => res.destroy(), 50);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
    gw = await startGateway({
      services: [
        {
          name: 'upstream',
          url: upstream.url,
          routes: [
            { name: 'keyed', hosts: ['keyed.test'], plugins: [{ name: 'proxy-cache', config: { strategy: 'memory', vary_headers: ['X-Foo'] } }] },
            { name: 'authed', hosts: ['authed.test'], plugins: [{ name: 'key-auth' }, { name: 'proxy-cache', config: { strategy: 'memory' } }] },
            { name: 'cut', hosts: ['cut.test'], plugins: [{ name: 'proxy-cache', config: { strategy: 'memory', content_type: ['text/plain'] } }] },
          ],
        },
      ],
      consumers: [{ username: 'bob', keyauth_credentials: [{ key: 'bob-key' }] }],
    });
    routeId = (await request(`${gw.admin}/routes/keyed`)).json().id;
    bobId = (await request(`${gw.admin}/consumers/bob`)).json().id;
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
  });

  it('without a query, the request line keeps its protocol', async () => {
    const res = await request(`${gw.http}/get`, { headers: { host: 'keyed.test' } });
    assert.equal(res.headers['x-cache-key'], sha256(`${routeId}|GET|GET /get HTTP/1.1||`));
  });

  it('with a query and a varying header, both in their parts', async () => {
    const res = await request(`${gw.http}/get?b=2&a=1&a=0`, { headers: { host: 'keyed.test', 'x-foo': 'bar' } });
    assert.equal(res.headers['x-cache-key'], sha256(`${routeId}|GET|GET /get|a=0,1:b=2|X-Foo=bar`));
  });

  it('an authenticated caller is keyed with its consumer', async () => {
    const authedRoute = (await request(`${gw.admin}/routes/authed`)).json().id;
    const res = await request(`${gw.http}/get`, { headers: { host: 'authed.test', apikey: 'bob-key' } });
    assert.equal(res.headers['x-cache-key'], sha256(`${bobId}:${authedRoute}|GET|GET /get HTTP/1.1||`));
  });

  it('a response the upstream cuts short is not stored', async () => {
    for (let i = 0; i < 2; i++) await assert.rejects(request(`${gw.http}/cut`, { headers: { host: 'cut.test' } }));
    assert.equal(cutServed, 2, 'the second request went upstream again');
  });
});
