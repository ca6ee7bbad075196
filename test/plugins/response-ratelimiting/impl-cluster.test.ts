/**
 * The `cluster` policy when the store fails, as Kong's "does not work / keeps working if an error occurs"
 * cases of rate-limiting: `fault_tolerant: false` answers 500, `true` proxies the request neither limited
 * nor counted, without the rate-limit headers, and X-Kong-Limit still never reaches the client.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, TEST_WORKERS, type TestGateway } from '../../helpers/gateway.ts';
import { startHttpbin, type Httpbin } from '../../fixtures/httpbin.ts';

const PATH = '/response-headers?x-kong-limit=video%3D1';

let upstream: Httpbin;
before(async () => {
  upstream = await startHttpbin();
});
after(() => upstream?.close());

// The store is closed under an in-process gateway.
for (const faultTolerant of [false, true]) {
  describe(`response-ratelimiting when the store fails (fault_tolerant: ${faultTolerant})`, { skip: TEST_WORKERS > 0 && 'needs the in-process gateway' }, () => {
    let gw: TestGateway;
    before(async () => {
      const plugin = { name: 'response-ratelimiting', config: { policy: 'cluster', limit_by: 'ip', fault_tolerant: faultTolerant, limits: { video: { hour: 6 } } } };
      gw = await startGateway({ services: [{ name: 'svc', url: upstream.url, routes: [{ name: 'r', paths: ['/'] }], plugins: [plugin] }] });
    });
    after(() => gw?.stop());

    test(faultTolerant ? 'keeps working if an error occurs' : 'does not work if an error occurs', async () => {
      const counted = await request(gw.http + PATH);
      assert.equal(counted.status, 200);
      assert.equal(counted.headers['x-ratelimit-limit-video-hour'], '6');
      await (gw.gateway as unknown as { store: { close(): Promise<void> } }).store.close();
      const res = await request(gw.http + PATH);
      if (faultTolerant) assert.equal(res.status, 200);
      else {
        assert.equal(res.status, 500);
        assert.match(res.json().message, /An unexpected error occurred/);
      }
      assert.equal(res.headers['x-ratelimit-limit-video-hour'], undefined);
      assert.equal(res.headers['x-ratelimit-remaining-video-hour'], undefined);
      assert.equal(res.headers['x-kong-limit'], undefined);
    });
  });
}
