/**
 * Kong's prometheus catalogue (spec/03-plugins/26-prometheus/02-access_spec.lua) on the admin /metrics:
 * kong_http_requests_total for proxied HTTP and gRPC requests (source service) and the gateway's own
 * answers (source kong), the consumer label only with per_consumer (a 401 from an auth plugin counts with
 * consumer=""), each granular switch (status codes, latencies, bandwidth) adding its series and no other,
 * Tollgate's own series beside Kong's, and every scrape line a comment or a metric.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { echoClient, startGrpcEcho, unary, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { issueToken, oauth2Plugin, tokenIssuerConfig } from '../../fixtures/oauth2-setup.ts';
import { pluginConfigErrors } from '../config-check.ts';

const ALL = { status_code_metrics: true, latency_metrics: true, bandwidth_metrics: true };

async function scrape(gw: TestGateway): Promise<string> {
  const res = await request(`${gw.admin}/metrics`);
  assert.equal(res.status, 200);
  return res.text;
}

describe('prometheus (access)', () => {
  let upstream: Upstream;
  let grpcUpstream: GrpcEcho;
  let gw: TestGateway;
  let token: string;

  before(async () => {
    upstream = await startUpstream((req, res) => {
      res.statusCode = Number(/\/status\/(\d+)/.exec(req.url ?? '')?.[1] ?? 200);
      res.end('{"ok":true}');
    });
    grpcUpstream = await startGrpcEcho();
    const issuer = tokenIssuerConfig();
    gw = await startGateway({
      services: [
        { name: 'mock-service', url: upstream.url, routes: [{ name: 'http-route', paths: ['/'], methods: ['GET'] }] },
        { name: 'grpc', url: `grpc://127.0.0.1:${grpcUpstream.port}`, routes: [{ name: 'grpc-route', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'] }] },
        { name: 'auth-service', url: upstream.url, routes: [{ name: 'auth-route', paths: ['/auth-required'], methods: ['GET'], plugins: [oauth2Plugin()] }] },
      ],
      routes: issuer.routes,
      consumers: issuer.consumers,
      plugins: [{ name: 'prometheus', config: { per_consumer: true, ...ALL } }],
    });
    token = await issueToken(gw.https);
  });

  after(async () => {
    await gw?.stop();
    await upstream?.close();
    await grpcUpstream?.close();
  });

  test('increments the count for proxied requests', async () => {
    assert.equal((await request(`${gw.http}/status/200`)).status, 200);
    assert.ok((await scrape(gw)).includes('kong_http_requests_total{service="mock-service",route="http-route",code="200",source="service",workspace="default",consumer=""} 1'));
    assert.equal((await request(`${gw.http}/status/400`)).status, 400);
    assert.ok((await scrape(gw)).includes('kong_http_requests_total{service="mock-service",route="http-route",code="400",source="service",workspace="default",consumer=""} 1'));
  });

  test('increments the count for proxied grpc requests', async () => {
    const client = echoClient(new URL(gw.h2c).host);
    try {
      await unary(client, { message: 'x' });
      assert.ok((await scrape(gw)).includes('kong_http_requests_total{service="grpc",route="grpc-route",code="200",source="service",workspace="default",consumer=""} 1'));
    } finally {
      client.close();
    }
  });

  test('behave correctly if consumer is not found: the 401 counts, source kong, consumer empty', async () => {
    assert.equal((await request(`${gw.https}/auth-required`)).status, 401);
    assert.ok((await scrape(gw)).includes('kong_http_requests_total{service="auth-service",route="auth-route",code="401",source="kong",workspace="default",consumer=""} 1'));
  });

  test('per_consumer: an authenticated request counts under its consumer', async () => {
    assert.equal((await request(`${gw.https}/auth-required`, { headers: { authorization: `Bearer ${token}` } })).status, 200);
    const body = await scrape(gw);
    assert.ok(body.includes('kong_http_requests_total{service="auth-service",route="auth-route",code="200",source="service",workspace="default",consumer="acme"} 1'), body);
    assert.match(body, /kong_bandwidth_bytes\{service="auth-service",route="auth-route",direction="egress",workspace="default",consumer="acme"\} \d+/);
  });

  test('latency histograms per service and route, with Kong\'s buckets', async () => {
    const body = await scrape(gw);
    assert.match(body, /kong_kong_latency_ms_bucket\{service="mock-service",route="http-route",workspace="default",le="7"\} \d+/);
    assert.match(body, /kong_upstream_latency_ms_bucket\{service="mock-service",route="http-route",workspace="default",le="80"\} \d+/);
    assert.match(body, /kong_request_latency_ms_count\{service="mock-service",route="http-route",workspace="default"\} [1-9]\d*/);
  });

  test('does not log error if no route was matched', async () => {
    assert.equal((await request(`${gw.http.replace('127.0.0.1', 'localhost')}/nowhere`, { method: 'POST' })).status, 404);
    assert.doesNotMatch(await scrape(gw), /^kong_http_requests_total\{[^}]*code="404"/m);
  });

  test('scrape response has metrics and comments only; Kong\'s series are served beside Tollgate\'s', async () => {
    const body = await scrape(gw);
    for (const line of body.split('\n')) if (line) assert.match(line, /^(#|kong_|tollgate_)/, line);
    assert.match(body, /^kong_node_info\{node_id="[0-9a-f-]{36}",version="3\.10\.0"\} 1$/m);
    assert.match(body, /^tollgate_http_requests_total\{/m);
  });
});

describe('prometheus (access) granular metrics switch', () => {
  const switches: [string, RegExp][] = [
    ['status_code_metrics', /^kong_http_requests_total\{/m],
    ['latency_metrics', /^kong_request_latency_ms_bucket\{/m],
    ['bandwidth_metrics', /^kong_bandwidth_bytes\{/m],
  ];
  for (const [flag, expected] of switches) {
    test(`${flag}: its series appear, and no other`, async () => {
      const upstream = await startUpstream();
      const gw = await startGateway({
        services: [{ name: 'mock-service', url: upstream.url, routes: [{ name: 'http-route', paths: ['/'] }] }],
        plugins: [{ name: 'prometheus', config: { [flag]: true } }],
      });
      try {
        assert.equal((await request(`${gw.http}/status/200`)).status, 200);
        const body = await scrape(gw);
        assert.match(body, expected);
        for (const [other, pattern] of switches) if (other !== flag) assert.doesNotMatch(body, pattern, other);
      } finally {
        await gw.stop();
        await upstream.close();
      }
    });
  }
});

describe('prometheus (schema)', () => {
  test("every Kong field is accepted, with Kong's defaults", async () => {
    assert.deepEqual(await pluginConfigErrors('prometheus', { per_consumer: true, status_code_metrics: true, ai_metrics: false, latency_metrics: true, bandwidth_metrics: true, upstream_health_metrics: true, wasm_metrics: false }), []);
    assert.deepEqual(await pluginConfigErrors('prometheus', { per_consumer: 'yes' }), ['config.per_consumer: expected a boolean']);
  });
});
