/**
 * Kong's response-ratelimiting catalogue (spec/03-plugins/24-response-rate-limiting/04-access_spec.lua) for
 * the `local` and `cluster` policies, against real gateways and a real upstream that sets X-Kong-Limit
 * from its query: remaining counts, the refusal once a usage the response used is used up (429 with the
 * headers), a service's limits shared by its routes, several usages at once, per consumer and per route
 * limits behind key-auth, the remaining counts sent upstream, several X-Kong-Limit headers,
 * block_on_first_violation, hide_client_headers, and X-Kong-Limit never reaching the client. Kong's spec
 * counts per second; here per minute, so that a run does not race a window's end (a run is not started
 * in a minute's last seconds).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { request, startGateway, type Reply, type TestGateway } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { startHttpbin, type Httpbin } from '../../fixtures/httpbin.ts';

const ITERATIONS = 6;

function plugin(policy: string, config: Record<string, unknown>, scope: Record<string, unknown> = {}) {
  return { name: 'response-ratelimiting', ...scope, config: { fault_tolerant: false, policy, ...config } };
}

function config(upstreamUrl: string, policy: string): Record<string, any> {
  const route = (n: number | string, plugins: unknown[]) => ({ name: `test${n}`, hosts: [`test${n}.test`], plugins });
  return {
    services: [
      {
        name: 'httpbin',
        url: upstreamUrl,
        routes: [
          route(1, [plugin(policy, { limits: { video: { minute: ITERATIONS } } })]),
          route('1b', [plugin(policy, { limits: { video: { minute: ITERATIONS } } })]),
          route(2, [plugin(policy, { limits: { video: { minute: ITERATIONS * 2, hour: ITERATIONS * 4 }, image: { minute: ITERATIONS } } })]),
          route(3, [
            { name: 'key-auth' },
            plugin(policy, { limits: { video: { minute: ITERATIONS - 3 } } }),
          ]),
          route(4, [plugin(policy, { limits: { video: { minute: ITERATIONS * 2 + 2 }, image: { minute: ITERATIONS } } })]),
          route(7, [plugin(policy, { block_on_first_violation: true, limits: { video: { minute: ITERATIONS, hour: ITERATIONS * 2 }, image: { minute: 4 } } })]),
          route(8, [plugin(policy, { limits: { video: { minute: ITERATIONS, hour: ITERATIONS * 2 }, image: { minute: ITERATIONS - 1 } } })]),
          route(9, [plugin(policy, { hide_client_headers: true, limits: { video: { minute: ITERATIONS } } })]),
        ],
      },
      {
        name: 'shared',
        url: upstreamUrl,
        routes: [route('-service1', []), route('-service2', [])],
        plugins: [plugin(policy, { limits: { video: { minute: ITERATIONS } } })],
      },
    ],
    consumers: [
      {
        username: 'provider_123',
        custom_id: 'provider_123',
        keyauth_credentials: [{ key: 'apikey123' }],
        // Its own limits on route 3 (Kong's precedence: consumer and route over route alone).
        plugins: [plugin(policy, { limits: { video: { minute: ITERATIONS - 2 } } }, { route: 'test3' })],
      },
      { username: 'provider_124', custom_id: 'provider_124', keyauth_credentials: [{ key: 'apikey124' }] },
    ],
  };
}

/** A run does not start in a minute's last seconds, where its counts would straddle two windows. */
async function startOfRun(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 10_000) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

for (const policy of ['local', 'cluster']) {
  describe(`response-ratelimiting with policy ${policy}`, () => {
    let gw: TestGateway;
    let upstream: Httpbin;

    before(async () => {
      upstream = await startHttpbin();
      gw = await startGateway(config(upstream.url, policy));
    });
    after(async () => {
      await gw?.stop();
      await upstream?.close();
    });

    const get = (host: string, path: string): Promise<Reply> => request(gw.http + path, { headers: { host } });
    const limited = (usage: string, query = '') => `/response-headers?x-kong-limit=${encodeURIComponent(usage)}${query}`;
    /** Kong's wait_remaining_sync: the log phase counts after the answer, so the next request may not see it yet. */
    const remainingOnceCounted = (host: string, expected: Record<string, number>, path = '/response-headers') =>
      waitFor(() => get(host, path), `remaining counts ${JSON.stringify(expected)}`, 5000, (res) =>
        Object.entries(expected).every(([header, value]) => Number(res.headers[header]) === value),
      );

    it('returns the remaining counter, without X-Kong-Limit', async () => {
      await startOfRun();
      const n = ITERATIONS / 2;
      for (let i = 0; i < n; i++) assert.equal((await get('test1.test', limited('video=1'))).status, 200);
      await remainingOnceCounted('test1.test', { 'x-ratelimit-remaining-video-minute': ITERATIONS - n });
      const res = await get('test1.test', limited('video=1'));
      assert.equal(res.status, 200);
      assert.equal(res.headers['x-ratelimit-limit-video-minute'], String(ITERATIONS));
      assert.equal(res.headers['x-ratelimit-remaining-video-minute'], String(ITERATIONS - n - 1));
      assert.equal(res.headers['x-kong-limit'], undefined);
    });

    it('blocks once the limit is exceeded', async () => {
      await startOfRun();
      for (let i = 0; i < ITERATIONS; i++) assert.equal((await get('test1b.test', limited('video=1'))).status, 200);
      await remainingOnceCounted('test1b.test', { 'x-ratelimit-remaining-video-minute': 0 });
      const res = await get('test1b.test', limited('video=1'));
      assert.equal(res.status, 429);
      assert.equal(res.body.length, 0, "Kong's kong.response.exit(429) carries no body");
      assert.equal(res.headers['content-length'], '0');
      assert.equal(res.headers['x-ratelimit-limit-video-minute'], String(ITERATIONS));
      assert.equal(res.headers['x-ratelimit-remaining-video-minute'], '0');
      assert.equal(res.headers['x-kong-limit'], undefined);
      // A response that uses nothing of the used-up usage still goes through.
      assert.equal((await get('test1b.test', '/get')).status, 200);
    });

    it("counts a service's routes together", async () => {
      await startOfRun();
      const path = limited(`video=1, test=${ITERATIONS}`);
      for (let i = 0; i < ITERATIONS / 2; i++) assert.equal((await get('test-service1.test', path)).status, 200);
      for (let i = ITERATIONS / 2; i < ITERATIONS; i++) assert.equal((await get('test-service2.test', path)).status, 200);
      await remainingOnceCounted('test-service1.test', { 'x-ratelimit-remaining-video-minute': 0 });
      assert.equal((await get('test-service1.test', path)).status, 429);
    });

    it('handles several usages', async () => {
      await startOfRun();
      const n = ITERATIONS / 2;
      let minute = ITERATIONS * 2;
      let hour = ITERATIONS * 4;
      for (let i = 0; i < n; i++) {
        assert.equal((await get('test2.test', limited('video=2, image=1'))).status, 200);
        minute -= 2;
        hour -= 2;
      }
      let res = await remainingOnceCounted('test2.test', { 'x-ratelimit-remaining-video-minute': minute, 'x-ratelimit-remaining-image-minute': ITERATIONS - n });
      assert.equal(res.headers['x-ratelimit-limit-video-minute'], String(ITERATIONS * 2));
      assert.equal(res.headers['x-ratelimit-limit-video-hour'], String(ITERATIONS * 4));
      assert.equal(res.headers['x-ratelimit-remaining-video-hour'], String(hour));
      assert.equal(res.headers['x-ratelimit-limit-image-minute'], String(ITERATIONS));
      assert.equal(res.headers['x-ratelimit-remaining-image-minute'], String(ITERATIONS - n));
      for (let i = n; i < ITERATIONS; i++) {
        assert.equal((await get('test2.test', limited('video=1, image=1'))).status, 200);
        minute -= 1;
        hour -= 1;
      }
      res = await remainingOnceCounted('test2.test', { 'x-ratelimit-remaining-video-minute': minute, 'x-ratelimit-remaining-image-minute': 0 });
      assert.equal(res.headers['x-ratelimit-remaining-image-minute'], '0');
      assert.equal(res.headers['x-ratelimit-remaining-video-hour'], String(hour));
      res = await get('test2.test', limited('video=1, image=1'));
      assert.equal(res.status, 429);
      assert.equal(res.headers['x-ratelimit-remaining-image-minute'], '0');
      assert.equal(res.headers['x-ratelimit-remaining-video-minute'], String(minute - 1));
      assert.equal(res.headers['x-ratelimit-remaining-video-hour'], String(hour - 1));
    });

    for (const [apikey, limit, what] of [['apikey123', ITERATIONS - 2, 'a consumer and route'], ['apikey124', ITERATIONS - 3, 'a route']] as const) {
      it(`blocks past the limit of ${what}`, async () => {
        await startOfRun();
        for (let i = 0; i < limit; i++) assert.equal((await get('test3.test', limited('video=1', `&apikey=${apikey}`))).status, 200);
        await remainingOnceCounted('test3.test', { 'x-ratelimit-remaining-video-minute': 0 }, `/response-headers?apikey=${apikey}`);
        const res = await get('test3.test', limited('video=1', `&apikey=${apikey}`));
        assert.equal(res.status, 429);
        assert.equal(res.headers['x-ratelimit-limit-video-minute'], String(limit));
        assert.equal(res.headers['x-ratelimit-remaining-video-minute'], '0');
      });
    }

    it('tells the upstream what is left of each usage', async () => {
      await startOfRun();
      let seen = (await get('test8.test', '/get')).json().headers;
      assert.equal(seen['x-ratelimit-remaining-image'], String(ITERATIONS - 1));
      assert.equal(seen['x-ratelimit-remaining-video'], String(ITERATIONS));
      const used = await get('test8.test', limited('video=2, image=1'));
      assert.equal(used.json().headers['x-kong-limit'], 'video=2, image=1');
      await remainingOnceCounted('test8.test', { 'x-ratelimit-remaining-video-minute': ITERATIONS - 2, 'x-ratelimit-remaining-image-minute': ITERATIONS - 2 });
      seen = (await get('test8.test', '/get')).json().headers;
      assert.equal(seen['x-ratelimit-remaining-image'], String(ITERATIONS - 2));
      assert.equal(seen['x-ratelimit-remaining-video'], String(ITERATIONS - 2));
    });

    it('combines several X-Kong-Limit headers from the upstream', async () => {
      await startOfRun();
      const both = '/response-headers?x-kong-limit=video%3D2&x-kong-limit=image%3D1';
      for (let i = 0; i < ITERATIONS; i++) assert.equal((await get('test4.test', both)).status, 200);
      await get('test4.test', limited('video=1'));
      await remainingOnceCounted('test4.test', { 'x-ratelimit-remaining-video-minute': 1, 'x-ratelimit-remaining-image-minute': 0 });
      const res = await get('test4.test', both);
      assert.equal(res.status, 429);
      assert.equal(res.headers['x-ratelimit-remaining-image-minute'], '0');
      assert.equal(res.headers['x-ratelimit-remaining-video-minute'], '0');
    });

    it('blocks on the first violation before going upstream', async () => {
      await startOfRun();
      assert.equal((await get('test7.test', limited('video=2, image=4'))).status, 200);
      await waitFor(() => get('test7.test', '/get'), 'image to be used up', 5000, (res) => res.status === 429);
      const served = upstream.served();
      const res = await get('test7.test', limited('video=2'));
      assert.equal(res.status, 429);
      // Kong's kong.response.error: the message and the request's id.
      assert.deepEqual(res.json(), { message: "API rate limit exceeded for 'image'", request_id: res.headers['x-kong-request-id'] });
      assert.equal(upstream.served(), served, 'refused in the access phase');
    });

    it('hides the headers with hide_client_headers', async () => {
      const res = await get('test9.test', '/status/200');
      assert.equal(res.status, 200);
      assert.equal(res.headers['x-ratelimit-remaining-video-minute'], undefined);
      assert.equal(res.headers['x-ratelimit-limit-video-minute'], undefined);
    });
  });
}
