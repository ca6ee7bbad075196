/**
 * Kong's rate-limiting catalogue (spec/03-plugins/23-rate-limiting/04-access_spec.lua) for the `local` and
 * `cluster` policies, against real gateways, upstreams and clients: 6 per minute by ip, service, path,
 * header, consumer and credential (oauth2 identifies the consumer here, where Kong's spec uses key-auth),
 * each with several values of the identifier; Kong's headers and Retry-After; gRPC (RESOURCE_EXHAUSTED with
 * the headers as metadata); hide_client_headers; several limits; expiry of the second window; a custom
 * error code and message; a global plugin by service and by credential across two services; and, for
 * `cluster`, counts that survive a restart and fault_tolerant when the store fails.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, startUpstream, type Reply, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { echoClient, grpc, startGrpcEcho, unary, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { waitFor } from '../../helpers/support.ts';

const CLIENTS = [
  { name: 'Bob App', client_id: 'bob-app', client_secret: 'bob-secret-123456' },
  { name: 'Alice App', client_id: 'alice-app', client_secret: 'alice-secret-12345' },
];
const OAUTH = { name: 'oauth2', config: { enable_client_credentials: true, global_credentials: true } };

interface Sequence {
  status: number[];
  minuteLimit: (number | undefined)[];
  minuteRemaining: (number | undefined)[];
  hourLimit: (number | undefined)[];
  hourRemaining: (number | undefined)[];
  limit: (number | undefined)[];
  remaining: (number | undefined)[];
  reset: (number | undefined)[];
}

const num = (v: string | string[] | undefined) => (v === undefined ? undefined : Number(v));

/** Kong's client_requests: n requests in a row, with the headers of each. */
async function clientRequests(n: number, send: () => Promise<Reply>): Promise<Sequence> {
  const out: Sequence = { status: [], minuteLimit: [], minuteRemaining: [], hourLimit: [], hourRemaining: [], limit: [], remaining: [], reset: [] };
  for (let i = 0; i < n; i++) {
    const res = await send();
    out.status.push(res.status);
    out.minuteLimit.push(num(res.headers['x-ratelimit-limit-minute']));
    out.minuteRemaining.push(num(res.headers['x-ratelimit-remaining-minute']));
    out.hourLimit.push(num(res.headers['x-ratelimit-limit-hour']));
    out.hourRemaining.push(num(res.headers['x-ratelimit-remaining-hour']));
    out.limit.push(num(res.headers['ratelimit-limit']));
    out.remaining.push(num(res.headers['ratelimit-remaining']));
    out.reset.push(num(res.headers['ratelimit-reset']));
  }
  return out;
}

/** Kong's validate_headers for 7 requests against 6 per minute. */
function validateHeaders(h: Sequence, checkHour = false): void {
  assert.deepEqual(h.minuteLimit, [6, 6, 6, 6, 6, 6, 6]);
  assert.deepEqual(h.minuteRemaining, [5, 4, 3, 2, 1, 0, 0]);
  if (checkHour) {
    for (const v of h.hourLimit) assert.ok(v! > 0);
    for (const v of h.hourRemaining) assert.ok(v! >= 0);
  }
  assert.deepEqual(h.limit, [6, 6, 6, 6, 6, 6, 6]);
  assert.deepEqual(h.remaining, [5, 4, 3, 2, 1, 0, 0]);
  assert.deepEqual(h.status, [200, 200, 200, 200, 200, 200, 429]);
  for (const reset of h.reset) assert.ok(reset! <= 60 && reset! >= 0, `reset ${reset}`);
}

const untilNextMinute = () => new Promise((resolve) => setTimeout(resolve, 60_000 - (Date.now() % 60_000)));

/**
 * Kong's retry: the counts belong to the current minute, so a run that crossed a minute boundary is run
 * once more, from the start of the minute after (the one it crossed into holds its last requests already).
 * A run does not start in a minute's last seconds, where it would likely cross and the retry costs a minute.
 */
async function inOneMinute(run: (round: number) => Promise<void>): Promise<void> {
  if (60_000 - (Date.now() % 60_000) < 5_000) await untilNextMinute();
  const minute = () => Math.floor(Date.now() / 60_000);
  const started = minute();
  try {
    await run(0);
  } catch (err) {
    if (minute() === started) throw err;
    await untilNextMinute();
    await run(1);
  }
}

async function tokenFor(gw: TestGateway, client: (typeof CLIENTS)[number]): Promise<string> {
  const res = await request(`${gw.https}/auth/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }).toString(),
  });
  assert.equal(res.status, 200, res.text);
  return res.json().access_token;
}

for (const policy of ['local', 'cluster'] as const) {
  describe(`rate-limiting (access) [policy: ${policy}]`, () => {
    let upstream: Upstream;
    let grpcUpstream: GrpcEcho;
    let gw: TestGateway;
    const tokens: string[] = [];

    const rl = (config: Record<string, unknown>) => ({ name: 'rate-limiting', config: { minute: 6, policy, ...config } });
    /** Each case gets routes of its own (Kong's spec creates a service per case), with the plugin on the service. */
    const service = (name: string, config: Record<string, unknown>, paths: string[], extraPlugins: unknown[] = []) => ({
      name,
      url: upstream.url,
      routes: paths.map((path, i) => ({ name: `${name}-${i}`, paths: [path] })),
      plugins: [rl(config), ...extraPlugins],
    });

    before(async () => {
      upstream = await startUpstream();
      grpcUpstream = await startGrpcEcho();
      gw = await startGateway({
        gateway: { trusted_ips: ['127.0.0.1/32', '::1/128'] },
        services: [
          service('single-ip', { limit_by: 'ip' }, ['/single-ip']),
          service('single-path', { limit_by: 'path', path: '/single-path' }, ['/single-path']),
          service('single-header', { limit_by: 'header', header_name: 'test-header' }, ['/single-header']),
          service('single-service', { limit_by: 'service' }, ['/single-service']),
          service('single-consumer', { limit_by: 'consumer' }, ['/single-consumer'], [OAUTH]),
          service('single-credential', { limit_by: 'credential' }, ['/single-credential'], [OAUTH]),
          service('multiple-ip', { limit_by: 'ip' }, ['/multiple-ip']),
          service('multiple-path', { limit_by: 'path', path: '/1-test' }, ['/1-test', '/2-test']),
          service('multiple-header', { limit_by: 'header', header_name: 'test-header-1' }, ['/multiple-header']),
          service('multiple-consumer', { limit_by: 'consumer' }, ['/multiple-consumer'], [OAUTH]),
          service('multiple-credential', { limit_by: 'credential' }, ['/multiple-credential'], [OAUTH]),
          service('hide', { limit_by: 'ip', hide_client_headers: true }, ['/hide']),
          service('multiple-limits', { limit_by: 'ip', hour: 99999 }, ['/multiple-limits']),
          service('expire', { limit_by: 'ip', second: 1, minute: null }, ['/expire']),
          service('custom-error', { limit_by: 'ip', minute: 1, error_code: 404, error_message: 'Fake Not Found' }, ['/custom-error']),
          {
            name: 'grpc',
            url: `grpc://127.0.0.1:${grpcUpstream.port}`,
            routes: [{ name: 'grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'] }],
            plugins: [rl({ limit_by: 'ip' })],
          },
        ],
        routes: [{ name: 'tokens', paths: ['/auth'], protocols: ['https'], plugins: [OAUTH] }],
        consumers: [
          { username: 'Bob', oauth2_credentials: [{ ...CLIENTS[0], redirect_uris: ['https://bob.example/cb'] }] },
          { username: 'Alice', oauth2_credentials: [{ ...CLIENTS[1], redirect_uris: ['https://alice.example/cb'] }] },
        ],
      });
      for (const client of CLIENTS) tokens.push(await tokenFor(gw, client));
    });

    after(async () => {
      await gw?.stop();
      await upstream?.close();
      await grpcUpstream?.close();
    });

    const GET = (path: string, headers: Record<string, string> = {}) => request(gw.http + path, { headers });
    const authed = (path: string, token: string) => request(gw.https + path, { headers: { authorization: `Bearer ${token}` } });

    for (const limitBy of ['ip', 'path', 'header', 'service'] as const) {
      test(`blocks if exceeding limit (single ${limitBy})`, () =>
        inOneMinute(async (round) => {
          const headers: Record<string, string> = limitBy === 'header' ? { 'test-header': `test-${round}` } : { 'x-real-ip': `127.0.0.${10 + round}` };
          validateHeaders(await clientRequests(7, () => GET(`/single-${limitBy}`, headers)));
        }));
    }

    for (const limitBy of ['consumer', 'credential'] as const) {
      test(`blocks if exceeding limit (single ${limitBy})`, () =>
        inOneMinute(async () => validateHeaders(await clientRequests(7, () => authed(`/single-${limitBy}`, tokens[0])))));

      test(`blocks if exceeding limit (multiple ${limitBy})`, () =>
        inOneMinute(async () => {
          for (const token of tokens) validateHeaders(await clientRequests(7, () => authed(`/multiple-${limitBy}`, token)));
        }));
    }

    test('blocks if exceeding limit (multiple ip)', () =>
      inOneMinute(async (round) => {
        for (const ip of [`127.0.0.${20 + round}`, `127.0.0.${30 + round}`]) validateHeaders(await clientRequests(7, () => GET('/multiple-ip', { 'x-real-ip': ip })));
      }));

    test('blocks if exceeding limit (multiple path): the path counts when it is the configured one, else the client address', () =>
      inOneMinute(async () => {
        for (const path of ['/1-test', '/2-test']) validateHeaders(await clientRequests(7, () => GET(path)));
      }));

    test('blocks if exceeding limit (multiple header)', () =>
      inOneMinute(async (round) => {
        // test-header-2 is not the configured header: those requests count by client address.
        for (const header of ['test-header-1', 'test-header-2']) {
          validateHeaders(await clientRequests(7, () => GET('/multiple-header', { [header]: 'test', 'x-real-ip': `127.0.0.${40 + round}` })));
        }
      }));

    test('blocks if exceeding limit #grpc (single ip)', async () => {
      const client = echoClient(new URL(gw.h2c).host);
      try {
        await inOneMinute(async (round) => {
          const metadata = { 'x-real-ip': `127.0.0.${50 + round}` };
          for (let i = 1; i <= 6; i++) {
            const { headers } = await unary(client, { message: 'x' }, { metadata });
            assert.equal(headers['x-ratelimit-limit-minute'], '6');
            assert.equal(headers['x-ratelimit-remaining-minute'], String(6 - i));
            assert.equal(headers['ratelimit-limit'], '6');
            assert.equal(headers['ratelimit-remaining'], String(6 - i));
            const reset = Number(headers['ratelimit-reset']);
            assert.ok(reset <= 60 && reset >= 0);
          }
          const err = await unary(client, { message: 'x' }, { metadata }).then(() => assert.fail('the 7th call should be refused'), (e: grpc.ServiceError) => e);
          assert.equal(err.code, grpc.status.RESOURCE_EXHAUSTED);
          assert.equal(err.details, 'API rate limit exceeded');
          const md = err.metadata.getMap();
          assert.equal(md['ratelimit-limit'], '6');
          assert.equal(md['ratelimit-remaining'], '0');
          const retry = Number(md['retry-after']);
          assert.ok(retry <= 60 && retry > 0);
        });
      } finally {
        client.close();
      }
    });

    test('hide_client_headers (single ip)', async () => {
      const names = ['x-ratelimit-limit-minute', 'x-ratelimit-remaining-minute', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after'];
      const first = await GET('/hide');
      assert.equal(first.status, 200);
      for (const name of names) assert.equal(first.headers[name], undefined, name);
      let res = first;
      await waitFor(async () => (res = await GET('/hide')).status === 429, 'the limit to be reached');
      for (const name of names) assert.equal(res.headers[name], undefined, name);
    });

    test('handles multiple limits (single ip)', () =>
      inOneMinute(async (round) => validateHeaders(await clientRequests(7, () => GET('/multiple-limits', { 'x-real-ip': `127.0.0.${60 + round}` })), true)));

    test('expire counter', async () => {
      const ip = { 'x-real-ip': '127.0.0.3' };
      // Kong's assertion retried every half second: the first request of a new second is allowed, then the next refused.
      await waitFor(async () => {
        const first = await GET('/expire', ip);
        if (first.status !== 200) return false;
        assert.equal(first.headers['ratelimit-limit'], '1');
        assert.equal(first.headers['ratelimit-remaining'], '0');
        assert.ok(Number(first.headers['ratelimit-reset']) >= 0);
        assert.equal(first.headers['x-ratelimit-limit-second'], '1');
        assert.equal(first.headers['x-ratelimit-remaining-second'], '0');
        const second = await GET('/expire', ip);
        if (second.status !== 429) return false; // the window turned between the two
        assert.equal(second.headers['retry-after'], '1');
        return true;
      }, 'a fresh second window', 15_000);
    });

    test('blocks with a custom error code and message', async () => {
      const ip = { 'x-real-ip': '127.0.0.4' };
      await inOneMinute(async (round) => {
        const who = { 'x-real-ip': `127.0.0.${70 + round}` };
        assert.equal((await GET('/custom-error', round === 0 ? ip : who)).status, 200);
        const res = await GET('/custom-error', round === 0 ? ip : who);
        assert.equal(res.status, 404);
        assert.match(res.json().message, /Fake Not Found/);
      });
    });
  });

  describe(`rate-limiting with a global plugin [policy: ${policy}]`, () => {
    let upstream: Upstream;
    let byService: TestGateway;
    let byCredential: TestGateway;
    let token: string;

    before(async () => {
      upstream = await startUpstream();
      const twoServices = [
        { name: 'service-1', url: upstream.url, routes: [{ name: 'route-1', paths: ['/1-test'] }] },
        { name: 'service-2', url: upstream.url, routes: [{ name: 'route-2', paths: ['/2-test'] }] },
      ];
      byService = await startGateway({ services: twoServices, plugins: [{ name: 'rate-limiting', config: { minute: 6, policy, limit_by: 'service' } }] });
      byCredential = await startGateway({
        services: twoServices,
        routes: [{ name: 'tokens', paths: ['/auth'], protocols: ['https'] }],
        consumers: [{ username: 'Bob', oauth2_credentials: [{ ...CLIENTS[0], redirect_uris: ['https://bob.example/cb'] }] }],
        plugins: [OAUTH, { name: 'rate-limiting', config: { minute: 6, policy, limit_by: 'credential' } }],
      });
      token = await tokenFor(byCredential, CLIENTS[0]);
    });

    after(async () => {
      await byService?.stop();
      await byCredential?.stop();
      await upstream?.close();
    });

    test('blocks if exceeding limit (multiple service)', () =>
      inOneMinute(async () => {
        for (const path of ['/1-test', '/2-test']) validateHeaders(await clientRequests(7, () => request(byService.http + path)));
      }));

    test('global for single consumer: one credential is counted across services', () =>
      inOneMinute(async () => {
        const send = (path: string) => () => request(byCredential.https + path, { headers: { authorization: `Bearer ${token}` } });
        validateHeaders(await clientRequests(7, send('/1-test')));
        const other = await clientRequests(7, send('/2-test'));
        assert.deepEqual(other.minuteLimit, [6, 6, 6, 6, 6, 6, 6]);
        assert.deepEqual(other.minuteRemaining, [0, 0, 0, 0, 0, 0, 0]);
        assert.deepEqual(other.status, [429, 429, 429, 429, 429, 429, 429]);
      }));
  });
}
