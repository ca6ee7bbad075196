/**
 * Kong's proxy-cache catalogue (spec/03-plugins/31-proxy-cache/02-access_spec.lua and 03-api_spec.lua)
 * against a real gateway and a real upstream that counts what it serves: Miss then Hit with the same key
 * and body and no upstream request; the diagnostic headers (config, defaults, Kong-Debug); cache_ttl and
 * storage_ttl (Refresh); Cache-Control from the upstream and the client (max-age, min-fresh, max-stale,
 * only-if-cached, no-store, Authorization); chunked bodies; keys by route, consumer, query and headers;
 * uncacheable methods, statuses and content types (Bypass); content types with wildcards and parameters;
 * ignore_uri_case; bodies past the cache's bound streamed uncached; and the admin endpoints.
 *
 * On worker processes (TOLLGATE_TEST_WORKERS) the same cases hold: a process without an entry takes
 * another's copy, and purges reach every process.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request, startGateway, type RequestOptions, type TestGateway } from '../../helpers/gateway.ts';
import { startHttpbin, type Httpbin } from '../../fixtures/httpbin.ts';

const ROUTE1_PLUGIN = '5c1b2d3e-0000-4000-8000-000000000001';
const JSON_AND_TEXT = { strategy: 'memory', content_type: ['text/plain', 'application/json'] };

const ROUTES: Record<number, Record<string, unknown>> = {
  2: {},
  5: {},
  6: { cache_ttl: 2 },
  7: { cache_control: true },
  8: { cache_control: true, storage_ttl: 600 },
  9: { cache_ttl: 2, storage_ttl: 60 },
  10: { content_type: ['text/html; charset=utf-8', 'application/json'], response_code: [200, 417], request_method: ['GET', 'HEAD', 'POST'] },
  11: { response_code: [200], request_method: ['GET', 'HEAD', 'POST'], vary_headers: ['foo'] },
  12: { response_code: [200], request_method: ['GET', 'HEAD', 'POST'], vary_query_params: ['foo'] },
  13: {},
  14: {},
  17: { content_type: ['*/*'] },
  18: { content_type: ['application/xml; charset=UTF-8'] },
  19: { content_type: ['application/xml;'] },
  20: { response_code: [404], ignore_uri_case: true },
  21: { response_code: [404], ignore_uri_case: false },
  22: { response_headers: { age: false, 'X-Cache-Status': false, 'X-Cache-Key': false } },
  23: { response_headers: { age: true, 'X-Cache-Status': true, 'X-Cache-Key': true } },
  24: {},
};
const KEY_AUTH_ROUTES = new Set([5, 13, 14]);

function config(upstreamUrl: string): Record<string, any> {
  const routes = Object.entries(ROUTES).map(([n, extra]) => ({
    name: `route-${n}`,
    hosts: [`route-${n}.test`],
    plugins: [
      { name: 'proxy-cache', config: { ...JSON_AND_TEXT, ...extra } },
      ...(KEY_AUTH_ROUTES.has(Number(n)) ? [{ name: 'key-auth' }] : []),
    ],
  }));
  routes.push({ name: 'route-1', hosts: ['route-1.test'], plugins: [{ id: ROUTE1_PLUGIN, name: 'proxy-cache', config: JSON_AND_TEXT } as any] });
  // Routes 3 and 4 have only the global instance.
  routes.push({ name: 'route-3', hosts: ['route-3.test'], plugins: [] }, { name: 'route-4', hosts: ['route-4.test'], plugins: [] });
  return {
    services: [{ name: 'httpbin', url: upstreamUrl, routes }],
    plugins: [{ name: 'proxy-cache', config: JSON_AND_TEXT }],
    consumers: [
      { username: 'bob', keyauth_credentials: [{ key: 'bob' }] },
      { username: 'alice', keyauth_credentials: [{ key: 'alice' }] },
    ],
  };
}

let gw: TestGateway;
let upstream: Httpbin;

before(async () => {
  upstream = await startHttpbin();
  gw = await startGateway(config(upstream.url));
});
after(async () => {
  await gw?.stop();
  await upstream?.close();
});

const get = (host: string, path = '/get', options: RequestOptions = {}) =>
  request(gw.http + path, { ...options, headers: { host, ...options.headers } });
const admin = (method: string, path: string) => request(gw.admin + path, { method });
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('proxy-cache access (memory)', () => {
  it('caches a simple request', async () => {
    const first = await get('route-1.test');
    assert.equal(first.status, 200);
    assert.equal(first.headers['x-cache-status'], 'Miss');
    const key = first.headers['x-cache-key'] as string;
    assert.match(key, /^[0-9a-f]{64}$/);
    const served = upstream.served();
    const second = await get('route-1.test');
    assert.equal(second.status, 200);
    assert.equal(second.headers['x-cache-status'], 'Hit');
    assert.equal(second.headers['x-cache-key'], key);
    assert.equal(second.text, first.text);
    assert.equal(upstream.served(), served, 'a hit does not reach the upstream');
    assert.equal(second.headers['content-type'], 'application/json');
    assert.ok(Number(second.headers.age) >= 0);
    assert.match(second.headers['x-kong-response-latency'] as string, /^\d+$/);
  });

  it('shows no X-Cache-* nor Age headers when configured off, unless Kong-Debug asks', async () => {
    await get('route-22.test');
    const res = await get('route-22.test');
    assert.equal(res.status, 200);
    assert.equal(res.headers['x-cache-status'], undefined);
    assert.equal(res.headers['x-cache-key'], undefined);
    assert.equal(res.headers.age, undefined);
    const debug = await get('route-22.test', '/get', { headers: { 'kong-debug': '1' } });
    assert.equal(debug.headers['x-cache-status'], 'Hit');
    assert.notEqual(debug.headers.age, undefined);
    assert.notEqual(debug.headers['x-cache-key'], undefined);
  });

  for (const route of ['route-23.test', 'route-24.test']) {
    it(`shows the diagnostic headers when configured or by default (${route})`, async () => {
      const miss = await get(route);
      assert.equal(miss.headers['x-cache-status'], 'Miss');
      assert.notEqual(miss.headers['x-cache-key'], undefined);
      assert.equal(miss.headers.age, undefined);
      const hit = await get(route);
      assert.equal(hit.headers['x-cache-status'], 'Hit');
      assert.notEqual(hit.headers.age, undefined);
      assert.notEqual(hit.headers['x-cache-key'], undefined);
    });
  }

  it('respects cache_ttl, and keeps entries for storage_ttl (Refresh)', async () => {
    assert.equal((await get('route-6.test')).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-6.test')).headers['x-cache-status'], 'Hit');
    assert.equal((await get('route-9.test')).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-9.test')).headers['x-cache-status'], 'Hit');
    await pause(3100);
    assert.equal((await get('route-6.test')).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-6.test')).headers['x-cache-status'], 'Hit');
    assert.equal((await get('route-9.test')).headers['x-cache-status'], 'Refresh');
    assert.equal((await get('route-9.test')).headers['x-cache-status'], 'Hit');
  });

  it("respects the upstream's Cache-Control (max-age; max-age=0 never cached)", async () => {
    assert.equal((await get('route-7.test', '/cache/2')).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-7.test', '/cache/2')).headers['x-cache-status'], 'Hit');
    await pause(3100);
    assert.equal((await get('route-7.test', '/cache/2')).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-7.test', '/cache/2')).headers['x-cache-status'], 'Hit');
    assert.equal((await get('route-7.test', '/cache/0')).headers['x-cache-status'], 'Bypass');
    assert.equal((await get('route-7.test', '/cache/0')).headers['x-cache-status'], 'Bypass');
  });

  it('caches with max-age or s-maxage without public, and with Expires alone', async () => {
    assert.equal((await get('route-7.test', '/response-headers?Cache-Control=max-age%3D604800')).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-7.test', '/response-headers?Cache-Control=s-maxage%3D604800')).headers['x-cache-status'], 'Miss');
    const expires = encodeURIComponent(new Date(Date.now() + 5_000_000).toUTCString());
    const path = `/response-headers?Expires=${expires}`;
    assert.equal((await get('route-7.test', path)).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-7.test', path)).headers['x-cache-status'], 'Hit');
    // Nothing saying how long: not cached with cache_control.
    assert.equal((await get('route-7.test', '/response-headers?a=b')).headers['x-cache-status'], 'Bypass');
    assert.equal((await get('route-7.test', '/response-headers?Cache-Control=private%2C%20max-age%3D60')).headers['x-cache-status'], 'Bypass');
  });

  describe("respects the client's Cache-Control", () => {
    it('min-fresh', async () => {
      await get('route-7.test', '/cache/2');
      const res = await get('route-7.test', '/cache/2', { headers: { 'cache-control': 'min-fresh=30' } });
      assert.equal(res.headers['x-cache-status'], 'Refresh');
    });

    it('max-age', async () => {
      assert.equal((await get('route-7.test', '/cache/10', { headers: { 'cache-control': 'max-age=2' } })).headers['x-cache-status'], 'Miss');
      assert.equal((await get('route-7.test', '/cache/10', { headers: { 'cache-control': 'max-age=2' } })).headers['x-cache-status'], 'Hit');
      await pause(3100);
      assert.equal((await get('route-7.test', '/cache/10', { headers: { 'cache-control': 'max-age=2' } })).headers['x-cache-status'], 'Refresh');
    });

    it('max-stale', async () => {
      assert.equal((await get('route-8.test', '/cache/2')).headers['x-cache-status'], 'Miss');
      assert.equal((await get('route-8.test', '/cache/2')).headers['x-cache-status'], 'Hit');
      await pause(4100);
      assert.equal((await get('route-8.test', '/cache/2', { headers: { 'cache-control': 'max-stale=1' } })).headers['x-cache-status'], 'Refresh');
    });

    it('only-if-cached', async () => {
      const res = await get('route-8.test', '/get?not=here', { headers: { 'cache-control': 'only-if-cached' } });
      assert.equal(res.status, 504);
    });

    it('no-store, no-cache and Authorization bypass the cache', async () => {
      for (const headers of [{ 'cache-control': 'no-store' }, { 'cache-control': 'no-cache' }, { authorization: 'Basic Ym9iOmtvbmc=' }]) {
        assert.equal((await get('route-7.test', '/cache/30', { headers })).headers['x-cache-status'], 'Bypass');
      }
    });
  });

  it('caches a streamed (chunked) response', async () => {
    const first = await get('route-1.test', '/stream/3');
    assert.equal(first.headers['x-cache-status'], 'Miss');
    assert.equal(first.headers['content-length'], undefined);
    const second = await get('route-1.test', '/stream/3');
    assert.equal(second.headers['x-cache-status'], 'Hit');
    assert.equal(second.text, first.text);
  });

  it('streams a body past the bound through, uncached', async () => {
    const size = 9 * 1024 * 1024;
    const first = await get('route-1.test', `/bytes/${size}`);
    assert.equal(first.body.length, size);
    assert.equal(first.headers['x-cache-status'], 'Miss');
    const second = await get('route-1.test', `/bytes/${size}`);
    assert.equal(second.body.length, size);
    assert.equal(second.headers['x-cache-status'], 'Miss');
  });

  it('keys the same consumer apart on different routes', async () => {
    const one = await get('route-13.test', '/get', { headers: { apikey: 'bob' } });
    const two = await get('route-14.test', '/get', { headers: { apikey: 'bob' } });
    assert.equal(one.status, 200);
    assert.notEqual(one.headers['x-cache-key'], two.headers['x-cache-key']);
  });

  it('keys a global instance apart per route', async () => {
    const three = await get('route-3.test');
    assert.equal(three.headers['x-cache-status'], 'Miss');
    const four = await get('route-4.test');
    assert.equal(four.headers['x-cache-status'], 'Miss');
    assert.notEqual(three.headers['x-cache-key'], four.headers['x-cache-key']);
  });

  it('differentiates caches between instances', async () => {
    const first = await get('route-2.test');
    assert.equal(first.headers['x-cache-status'], 'Miss');
    const second = await get('route-2.test');
    assert.equal(second.headers['x-cache-status'], 'Hit');
    assert.equal(second.headers['x-cache-key'], first.headers['x-cache-key']);
  });

  it('uses the query as part of the key, in any order', async () => {
    assert.equal((await get('route-1.test', '/get?a=b&b=c')).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-1.test', '/get?a=c')).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-1.test', '/get?b=c&a=b')).headers['x-cache-status'], 'Hit');
    assert.equal((await get('route-1.test', '/get?a&b')).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-1.test', '/get?a&b')).headers['x-cache-status'], 'Hit');
  });

  it('can key on a subset of the query arguments', async () => {
    assert.equal((await get('route-12.test', '/get?foo=b&b=c')).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-12.test', '/get?b=d&foo=b')).headers['x-cache-status'], 'Hit');
  });

  it('uses headers when told to', async () => {
    assert.equal((await get('route-11.test', '/get', { headers: { foo: 'bar' } })).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-11.test', '/get', { headers: { foo: 'bar' } })).headers['x-cache-status'], 'Hit');
    assert.equal((await get('route-11.test', '/get', { headers: { foo: 'baz' } })).headers['x-cache-status'], 'Miss');
  });

  describe('authenticated routes', () => {
    it('leaves a request refused by authentication alone', async () => {
      const res = await get('route-5.test');
      assert.equal(res.status, 401);
      assert.equal(res.headers['x-cache-status'], undefined);
    });

    it('keeps a cache per consumer', async () => {
      for (const apikey of ['bob', 'alice']) {
        assert.equal((await get('route-5.test', '/get', { headers: { apikey } })).headers['x-cache-status'], 'Miss');
        assert.equal((await get('route-5.test', '/get', { headers: { apikey } })).headers['x-cache-status'], 'Hit');
      }
    });
  });

  describe('bypasses', () => {
    it('an uncacheable method', async () => {
      const res = await get('route-1.test', '/post', { method: 'POST', body: { foo: 'bar' } });
      assert.equal(res.status, 200);
      assert.equal(res.headers['x-cache-status'], 'Bypass');
    });

    it('an uncacheable status', async () => {
      const res = await get('route-1.test', '/status/418');
      assert.equal(res.status, 418);
      assert.equal(res.headers['x-cache-status'], 'Bypass');
    });

    it('an uncacheable content type', async () => {
      const res = await get('route-1.test', '/xml');
      assert.equal(res.status, 200);
      assert.equal(res.headers['x-cache-status'], 'Bypass');
    });
  });

  describe('caches what is configured beyond the defaults', () => {
    it('request methods', async () => {
      assert.equal((await get('route-10.test', '/post', { method: 'POST', body: { foo: 'bar' } })).headers['x-cache-status'], 'Miss');
      assert.equal((await get('route-10.test', '/post', { method: 'POST', body: { foo: 'bar' } })).headers['x-cache-status'], 'Hit');
    });

    it('response statuses', async () => {
      const miss = await get('route-10.test', '/status/417');
      assert.equal(miss.status, 417);
      assert.equal(miss.headers['x-cache-status'], 'Bypass', 'text/plain is not among route 10 content types');
      const json = await get('route-10.test', '/response-headers?x=417');
      assert.equal(json.headers['x-cache-status'], 'Miss');
    });
  });

  describe('content types', () => {
    it('caches anything with */*', async () => {
      const miss = await get('route-17.test', '/xml');
      assert.equal(miss.headers['content-type'], 'application/xml');
      assert.equal(miss.headers['x-cache-status'], 'Miss');
      const hit = await get('route-17.test', '/xml');
      assert.equal(hit.headers['content-type'], 'application/xml');
      assert.equal(hit.headers['x-cache-status'], 'Hit');
    });

    it('does not cache when the parameters differ', async () => {
      assert.equal((await get('route-18.test', '/xml')).headers['x-cache-status'], 'Bypass');
    });

    it('bypasses an invalid content type from the upstream', async () => {
      const res = await get('route-18.test', '/response-headers?Content-Type=application/xml;');
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'application/xml;');
      assert.equal(res.headers['x-cache-status'], 'Bypass');
    });

    it('bypasses with an invalid configured content type', async () => {
      const res = await get('route-19.test', '/xml');
      assert.equal(res.status, 200);
      assert.equal(res.headers['x-cache-status'], 'Bypass');
    });
  });

  it('ignores the URI case in the key when told to', async () => {
    const first = await get('route-20.test', '/ignore-case/kong');
    assert.equal(first.status, 404);
    assert.equal(first.headers['x-cache-status'], 'Miss');
    const second = await get('route-20.test', '/ignore-case/KONG');
    assert.equal(second.status, 404);
    assert.equal(second.headers['x-cache-status'], 'Hit');
    assert.equal(second.headers['x-cache-key'], first.headers['x-cache-key']);
    assert.equal(second.text, first.text);
  });

  it('keeps the URI case in the key by default', async () => {
    const first = await get('route-21.test', '/acknowledge-case/kong');
    assert.equal(first.headers['x-cache-status'], 'Miss');
    const second = await get('route-21.test', '/acknowledge-case/KONG');
    assert.equal(second.headers['x-cache-status'], 'Miss');
    assert.notEqual(second.headers['x-cache-key'], first.headers['x-cache-key']);
  });
});

describe('proxy-cache admin API', () => {
  it('reads, deletes and purges entries', async () => {
    await admin('DELETE', '/proxy-cache');
    const miss = await get('route-1.test', '/get?admin=1');
    assert.equal(miss.headers['x-cache-status'], 'Miss');
    const key = miss.headers['x-cache-key'] as string;
    assert.equal((await get('route-1.test', '/get?admin=1')).headers['x-cache-status'], 'Hit');

    const entry = await admin('GET', `/proxy-cache/${ROUTE1_PLUGIN}/caches/${key}`);
    assert.equal(entry.status, 200);
    assert.equal(entry.json().headers['x-cache-key'], key);
    assert.equal(entry.json().status, 200);
    assert.equal(entry.json().body, miss.text);
    assert.equal((await admin('GET', `/proxy-cache/${key}`)).json().headers['x-cache-key'], key);

    assert.equal((await admin('DELETE', `/proxy-cache/${ROUTE1_PLUGIN}/caches/${key}`)).status, 204);
    assert.equal((await get('route-1.test', '/get?admin=1')).headers['x-cache-status'], 'Miss');
    assert.equal((await admin('DELETE', `/proxy-cache/${key}`)).status, 204);
    assert.equal((await get('route-1.test', '/get?admin=1')).headers['x-cache-status'], 'Miss');

    const two = await get('route-2.test', '/get?admin=2');
    assert.equal((await get('route-2.test', '/get?admin=2')).headers['x-cache-status'], 'Hit');
    assert.equal((await admin('DELETE', '/proxy-cache')).status, 204);
    assert.equal((await get('route-1.test', '/get?admin=1')).headers['x-cache-status'], 'Miss');
    assert.equal((await get('route-2.test', '/get?admin=2')).headers['x-cache-status'], 'Miss');
    assert.equal(two.status, 200);
  });

  it('answers 404 for an unknown key or plugin', async () => {
    assert.equal((await admin('DELETE', '/proxy-cache')).status, 204);
    assert.equal((await admin('DELETE', `/proxy-cache/${ROUTE1_PLUGIN}/caches/123`)).status, 404);
    const unknownPlugin = await admin('DELETE', `/proxy-cache/0f000000-0000-4000-8000-000000000000/caches/123`);
    assert.equal(unknownPlugin.status, 404);
    assert.deepEqual(unknownPlugin.json(), { message: 'Not found' });
    assert.equal((await admin('GET', `/proxy-cache/${ROUTE1_PLUGIN}/caches/123`)).status, 404);
    assert.equal((await admin('GET', '/proxy-cache/123')).status, 404);
  });
});
