/**
 * The `cluster` policy on the gateway's store beyond Kong's catalogue: counts are in the store (a restart
 * on the same data directory keeps them, where `local` starts again from zero), and when the store fails
 * `fault_tolerant` decides, as in Kong's "does not work / keeps working if an error occurs" cases: 500
 * without headers, or the request proxied uncounted without headers. Also: WebSocket handshakes are
 * counted and refused like any request.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { request, startGateway, startUpstream, tempDir, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { startWsEcho } from '../../fixtures/ws-echo.ts';

const RL_HEADERS = ['x-ratelimit-limit-hour', 'x-ratelimit-remaining-hour', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'];

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(() => upstream?.close());

function config(policy: string, faultTolerant = true): Record<string, any> {
  return {
    services: [{ name: 'svc', url: upstream.url, routes: [{ name: 'r', paths: ['/test'] }], plugins: [{ name: 'rate-limiting', config: { hour: 6, limit_by: 'ip', policy, fault_tolerant: faultTolerant } }] }],
  };
}

/** The remaining count of the hour after `n` requests, across a restart in the middle. */
async function remainingAcrossRestart(policy: string): Promise<string[]> {
  const dataDir = tempDir();
  const seen: string[] = [];
  for (let run = 0; run < 2; run++) {
    const gw = await startGateway(config(policy), { dataDir });
    try {
      for (let i = 0; i < 2; i++) seen.push(String((await request(`${gw.http}/test`)).headers['x-ratelimit-remaining-hour']));
    } finally {
      await gw.stop();
    }
  }
  return seen;
}

describe('rate-limiting cluster policy', () => {
  test('counts are kept in the store: a restart continues them (local ones start again)', async () => {
    const hour = () => Math.floor(Date.now() / 3_600_000);
    const started = hour();
    const cluster = await remainingAcrossRestart('cluster');
    const local = await remainingAcrossRestart('local');
    if (hour() !== started) return; // an hour boundary between the runs: the counts started again by design
    assert.deepEqual(cluster, ['5', '4', '3', '2']);
    assert.deepEqual(local, ['5', '4', '5', '4']);
  });

  for (const faultTolerant of [false, true]) {
    describe(`when the store fails (fault_tolerant: ${faultTolerant})`, () => {
      let gw: TestGateway;
      before(async () => {
        gw = await startGateway(config('cluster', faultTolerant));
      });
      after(() => gw?.stop());

      test(faultTolerant ? 'keeps working if an error occurs' : 'does not work if an error occurs', async () => {
        const before = await request(`${gw.http}/test`);
        assert.equal(before.status, 200);
        assert.equal(before.headers['x-ratelimit-limit-hour'], '6');
        // The real store, closed under the running gateway: every read fails from now on.
        await (gw.gateway as unknown as { store: { close(): Promise<void> } }).store.close();
        const res = await request(`${gw.http}/test`);
        if (faultTolerant) assert.equal(res.status, 200);
        else {
          assert.equal(res.status, 500);
          assert.match(res.json().message, /An unexpected error occurred/);
        }
        for (const name of RL_HEADERS) assert.equal(res.headers[name], undefined, name);
      });
    });
  }
});

describe('rate-limiting on WebSocket handshakes', () => {
  test('handshakes are counted; past the limit one is refused with 429 and the headers, before any upgrade', async () => {
    const ws = await startWsEcho();
    const gw = await startGateway({
      services: [{ name: 'ws', url: `http://127.0.0.1:${ws.port}`, routes: [{ name: 'ws', protocols: ['ws'], paths: ['/ws'] }], plugins: [{ name: 'rate-limiting', config: { hour: 2, limit_by: 'ip' } }] }],
    });
    const handshake = () =>
      new Promise<{ status: number; headers: Record<string, unknown> }>((resolve, reject) => {
        const client = new WebSocket(`${gw.http.replace('http', 'ws')}/ws`);
        client.once('upgrade', (res) => {
          resolve({ status: 101, headers: res.headers });
          client.close();
        });
        client.once('unexpected-response', (_req, res) => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
        client.once('error', reject);
      });
    try {
      const hour = Math.floor(Date.now() / 3_600_000);
      const results = [await handshake(), await handshake(), await handshake()];
      if (Math.floor(Date.now() / 3_600_000) !== hour) return; // the hour turned: the counts restarted
      assert.deepEqual(results.map((r) => r.status), [101, 101, 429]);
      assert.equal(results[0].headers['x-ratelimit-remaining-hour'], '1');
      assert.equal(results[2].headers['ratelimit-remaining'], '0');
      assert.ok(Number(results[2].headers['retry-after']) > 0);
    } finally {
      await gw.stop();
      await ws.close();
    }
  });
});
