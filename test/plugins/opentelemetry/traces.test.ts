/**
 * Kong's opentelemetry plugin (spec/03-plugins/37-opentelemetry/{01-otlp,03-propagation,04-exporter}_spec.lua)
 * against a real OTLP/HTTP receiver that decodes the protobuf, and a real upstream that shows the headers
 * it got: the `kong` and `kong.balancer` spans with Kong's attributes, ids and parents; the trace context
 * read from W3C and B3 (multi and single header) and injected as the config says; the client's "not
 * sampled" honoured; sampling_rate; the trace id response header; retries of a failed export; the config's
 * refusals.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, spawnGateway, startGateway, startUpstream, type EchoRequest, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../../fixtures/otlp-receiver.ts';
import { pluginConfigErrors } from '../config-check.ts';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const PARENT_ID = 'b7ad6b7169203331';
/** Batches leave at once: the tests wait on what arrives, never on time. */
const QUEUE = {
  max_batch_size: 200,
  max_coalescing_delay: 0,
  max_entries: 10_000,
  max_retry_time: 60,
  initial_retry_delay: 0.01,
  max_retry_delay: 0.05,
  concurrency_limit: 1,
};

describe('opentelemetry', () => {
  let upstream: Upstream;
  let receiver: OtlpReceiver;
  let gw: TestGateway;
  let config: Record<string, any>;

  /** One request through `path`; what the upstream received. */
  async function proxied(path: string, headers: Record<string, string> = {}): Promise<{ upstreamHeaders: EchoRequest['headers']; responseHeaders: Record<string, unknown> }> {
    const res = await request(`${gw.http}${path}`, { headers });
    assert.equal(res.status, 200, res.text);
    return { upstreamHeaders: (res.json() as EchoRequest).headers, responseHeaders: res.headers };
  }

  const spansOf = (traceId: string) => waitFor(() => {
    const found = receiver.spans().filter((s) => s.traceId === traceId);
    return found.length >= 2 && found;
  }, `the spans of trace ${traceId}`);

  const byName = (spans: ReceivedSpan[], name: string) => spans.find((s) => s.name === name)!;

  before(async () => {
    upstream = await startUpstream();
    receiver = await startOtlpReceiver();
    const otel = (config: Record<string, unknown>) => [{ name: 'opentelemetry', config: { traces_endpoint: receiver.url, queue: QUEUE, ...config } }];
    config = {
      services: [
        {
          name: 'mock-service',
          url: upstream.url,
          routes: [
            { name: 'preserve', paths: ['/preserve'], plugins: otel({ headers: { 'x-api-token': 'secret' }, resource_attributes: { 'service.name': 'edge', 'deployment.environment': 'test' }, http_response_header_for_traceid: 'X-Trace-Id' }) },
            { name: 'b3-out', paths: ['/b3-out'], plugins: otel({ header_type: 'b3' }) },
            { name: 'ignore', paths: ['/ignore'], plugins: otel({ header_type: 'ignore', propagation: { default_format: 'b3-single' } }) },
            { name: 'never', paths: ['/never'], plugins: otel({ sampling_rate: 0 }) },
            { name: 'clear', paths: ['/clear'], plugins: otel({ propagation: { extract: ['w3c', 'ot'], inject: ['w3c'], clear: ['ot-tracer-traceid', 'ot-tracer-spanid', 'ot-tracer-sampled'], default_format: 'w3c' } }) },
            { name: 'no-preserve', paths: ['/no-preserve'], plugins: otel({ propagation: { extract: ['b3'], inject: ['w3c'], default_format: 'w3c' } }) },
            { name: 'endpoint', paths: ['/endpoint'], plugins: [{ name: 'opentelemetry', config: { endpoint: receiver.url, queue: QUEUE } }] },
            { name: 'refused', paths: ['/refused'], plugins: [...otel({}), { name: 'request-termination', config: { status_code: 403, message: 'no' } }] },
          ],
        },
      ],
    };
    gw = await startGateway(config);
  });

  after(async () => {
    await gw?.stop();
    await upstream?.close();
    await receiver?.close();
  });

  test('a W3C traceparent: the trace goes on upstream under the balancer span, and both spans reach the receiver', async () => {
    const { upstreamHeaders, responseHeaders } = await proxied('/preserve/items?a=1', { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` });
    const sent = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(upstreamHeaders.traceparent as string);
    assert.ok(sent, String(upstreamHeaders.traceparent));
    assert.equal(sent[1], TRACE_ID);
    assert.equal(responseHeaders['x-trace-id'], TRACE_ID);

    const spans = await spansOf(TRACE_ID);
    const root = byName(spans, 'kong');
    const balancer = byName(spans, 'kong.balancer');
    assert.equal(root.parentSpanId, PARENT_ID);
    assert.equal(root.kind, 2);
    assert.equal(balancer.spanId, sent[2], 'the upstream learns the balancer span as its parent');
    assert.equal(balancer.parentSpanId, root.spanId);
    assert.equal(balancer.kind, 3);
    assert.ok(root.startNs <= balancer.startNs && balancer.endNs <= root.endNs && root.startNs < root.endNs);
    const host = new URL(gw.http).hostname;
    assert.deepEqual(
      { ...root.attributes, 'kong.request.id': undefined },
      {
        'http.method': 'GET', 'http.url': `http://${host}/preserve/items?a=1`, 'http.host': host, 'http.scheme': 'http', 'http.flavor': '1.1',
        'http.client_ip': '127.0.0.1', 'net.peer.ip': '127.0.0.1', 'http.status_code': 200, 'http.route': '/preserve', 'kong.request.id': undefined,
      },
    );
    assert.equal(root.attributeTypes['http.status_code'], 'int_value');
    assert.match(String(root.attributes['kong.request.id']), /\S/);
    assert.equal(balancer.attributes['net.peer.name'], '127.0.0.1');
    assert.equal(balancer.statusCode, undefined);

    const batch = receiver.batches.find((b) => b.spans.some((s) => s.traceId === TRACE_ID))!;
    assert.equal(batch.headers['x-api-token'], 'secret');
    assert.deepEqual(batch.scope, { name: 'kong-internal', version: '0.1.0' });
    assert.equal(batch.resource['service.name'], 'edge');
    assert.equal(batch.resource['deployment.environment'], 'test');
    assert.match(String(batch.resource['service.instance.id']), /^[0-9a-f-]{36}$/);
    assert.equal(batch.resource['service.version'], '3.10.0');
  });

  test('no trace headers: a new trace, injected as W3C (the default format)', async () => {
    const { upstreamHeaders, responseHeaders } = await proxied('/preserve');
    const sent = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(upstreamHeaders.traceparent as string);
    assert.ok(sent);
    assert.equal(responseHeaders['x-trace-id'], sent[1]);
    const root = byName(await spansOf(sent[1]), 'kong');
    assert.equal(root.parentSpanId, '');
  });

  test('B3 headers: preserved as B3, a 64-bit trace id kept at 64 bits, the root span as the parent span', async () => {
    const traceId = '463ac35c9f6413ad';
    const { upstreamHeaders } = await proxied('/preserve', { 'x-b3-traceid': traceId, 'x-b3-spanid': PARENT_ID, 'x-b3-sampled': '1' });
    assert.equal(upstreamHeaders['x-b3-traceid'], traceId);
    assert.equal(upstreamHeaders['x-b3-sampled'], '1');
    assert.equal(upstreamHeaders.traceparent, undefined);
    const spans = await spansOf('0000000000000000' + traceId);
    assert.equal(upstreamHeaders['x-b3-spanid'], byName(spans, 'kong.balancer').spanId);
    assert.equal(upstreamHeaders['x-b3-parentspanid'], byName(spans, 'kong').spanId);
    assert.equal(byName(spans, 'kong').parentSpanId, PARENT_ID);
  });

  test('the B3 single header: preserved in its single form, the debug flag kept', async () => {
    const { upstreamHeaders } = await proxied('/preserve', { b3: `${TRACE_ID}-${PARENT_ID}-d` });
    const sent = new RegExp(`^${TRACE_ID}-([0-9a-f]{16})-d-([0-9a-f]{16})$`).exec(upstreamHeaders.b3 as string);
    assert.ok(sent, String(upstreamHeaders.b3));
    assert.equal(upstreamHeaders['x-b3-traceid'], undefined);
  });

  test('header_type b3: the incoming W3C context is preserved and also written as B3', async () => {
    const traceId = '1af7651916cd43dd8448eb211c80319d';
    const { upstreamHeaders } = await proxied('/b3-out', { traceparent: `00-${traceId}-${PARENT_ID}-01` });
    assert.match(upstreamHeaders.traceparent as string, new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    assert.equal(upstreamHeaders['x-b3-traceid'], traceId);
    assert.equal(upstreamHeaders['x-b3-sampled'], '1');
  });

  test('header_type ignore: the incoming context is not read; the default format carries a new trace', async () => {
    const { upstreamHeaders } = await proxied('/ignore', { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` });
    assert.equal(upstreamHeaders.traceparent, `00-${TRACE_ID}-${PARENT_ID}-01`, 'the client header itself passes untouched');
    const sent = /^([0-9a-f]{32})-([0-9a-f]{16})-1-([0-9a-f]{16})$/.exec(upstreamHeaders.b3 as string);
    assert.ok(sent, String(upstreamHeaders.b3));
    assert.notEqual(sent[1], TRACE_ID);
  });

  test('propagation: cleared headers do not go upstream; without preserve the incoming format is left as it came', async () => {
    const cleared = await proxied('/clear', { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`, 'ot-tracer-traceid': TRACE_ID, 'ot-tracer-spanid': PARENT_ID, 'ot-tracer-sampled': '1' });
    assert.match(cleared.upstreamHeaders.traceparent as string, new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));
    for (const name of ['ot-tracer-traceid', 'ot-tracer-spanid', 'ot-tracer-sampled']) assert.equal(cleared.upstreamHeaders[name], undefined, name);
    const b3 = `${TRACE_ID}-${PARENT_ID}-1-c7ad6b7169203331`;
    const kept = await proxied('/no-preserve', { b3 });
    assert.equal(kept.upstreamHeaders.b3, b3, 'b3 was not injected, only passed on as it came');
    assert.match(kept.upstreamHeaders.traceparent as string, new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));
  });

  test("a client's not-sampled decision is kept: propagated with 00, no span exported", async () => {
    const unsampled = '2af7651916cd43dd8448eb211c80319e';
    const { upstreamHeaders } = await proxied('/preserve', { traceparent: `00-${unsampled}-${PARENT_ID}-00` });
    assert.match(upstreamHeaders.traceparent as string, new RegExp(`^00-${unsampled}-[0-9a-f]{16}-00$`));
    const never = await proxied('/never');
    assert.match(never.upstreamHeaders.traceparent as string, /-00$/, 'sampling_rate 0 samples nothing');
    // Batches leave in order: once a later trace is in, an earlier one would have been.
    const later = '3af7651916cd43dd8448eb211c80319f';
    await proxied('/preserve', { traceparent: `00-${later}-${PARENT_ID}-01` });
    await spansOf(later);
    const neverTrace = (never.upstreamHeaders.traceparent as string).split('-')[1];
    assert.equal(receiver.spans().filter((s) => s.traceId === unsampled || s.traceId === neverTrace).length, 0);
  });

  test('the deprecated endpoint field sends traces as traces_endpoint', async () => {
    const { upstreamHeaders } = await proxied('/endpoint');
    await spansOf((upstreamHeaders.traceparent as string).split('-')[1]);
  });

  test('a request a plugin answers: the kong span only, with its status', async () => {
    const traceId = '4af7651916cd43dd8448eb211c8031a0';
    const res = await request(`${gw.http}/refused`, { headers: { traceparent: `00-${traceId}-${PARENT_ID}-01` } });
    assert.equal(res.status, 403);
    const root = await waitFor(() => receiver.spans().find((s) => s.traceId === traceId), 'the kong span');
    assert.equal(root.name, 'kong');
    assert.equal(root.attributes['http.status_code'], 403);
    // The balancer span would have been in the same batch.
    assert.equal(receiver.spans().filter((s) => s.traceId === traceId).length, 1);
  });

  test('a reload (as SIGHUP) applies the new header_type to the next requests', async () => {
    const reloaded = structuredClone(config);
    reloaded.services[0].routes.find((r: any) => r.name === 'endpoint').plugins[0].config.header_type = 'jaeger';
    assert.equal(await gw.reload(reloaded), true);
    const { upstreamHeaders } = await proxied('/endpoint', { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` });
    assert.match(upstreamHeaders['uber-trace-id'] as string, new RegExp(`^${TRACE_ID}:[0-9a-f]{16}:[0-9a-f]{16}:01$`));
  });

  test('a batch the receiver refuses is sent again', async () => {
    receiver.failNext(500, 503);
    const { upstreamHeaders } = await proxied('/preserve');
    await spansOf((upstreamHeaders.traceparent as string).split('-')[1]);
  });
});

describe('opentelemetry (log serializer)', () => {
  test('the access log line carries the trace id of each injected format', async () => {
    const upstream = await startUpstream();
    const gw = await spawnGateway({
      gateway: { log_level: 'info', proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'] },
      services: [{ name: 's', url: upstream.url, routes: [{ name: 'traced', paths: ['/'], plugins: [{ name: 'opentelemetry', config: { traces_endpoint: 'http://127.0.0.1:9/v1/traces', header_type: 'b3' } }] }] }],
    });
    try {
      const res = await request(`${gw.http}/`, { headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` } });
      assert.equal(res.status, 200);
      await waitFor(() => gw.output().includes('"type":"access"'), 'the access log line');
      const line = JSON.parse(gw.output().split('\n').find((l) => l.includes('"type":"access"'))!);
      assert.deepEqual(line.trace_id, { w3c: TRACE_ID, b3: TRACE_ID });
    } finally {
      gw.kill();
      await gw.exited;
      await upstream.close();
    }
  });
});

describe('opentelemetry (config)', () => {
  test("Kong's schema: an endpoint is required, logs and the datadog format are refused by name", async () => {
    assert.deepEqual(await pluginConfigErrors('opentelemetry', {}), ["config: at least one of these fields must be non-empty: 'traces_endpoint', 'logs_endpoint'"]);
    assert.deepEqual(await pluginConfigErrors('opentelemetry', { endpoint: 'http://127.0.0.1:4318/v1/traces' }), []);
    assert.deepEqual(await pluginConfigErrors('opentelemetry', { traces_endpoint: 'ftp://x' }), ['config.traces_endpoint: must be an absolute http or https URL']);
    const [logs] = await pluginConfigErrors('opentelemetry', { logs_endpoint: 'http://127.0.0.1:4318/v1/logs' });
    assert.match(logs, /^config\.logs_endpoint: Tollgate exports traces only/);
    const [datadog] = await pluginConfigErrors('opentelemetry', { traces_endpoint: 'http://x/v1/traces', header_type: 'datadog' });
    assert.match(datadog, /^config\.header_type: Tollgate does not implement the datadog header format/);
    assert.deepEqual(await pluginConfigErrors('opentelemetry', { traces_endpoint: 'http://x/v1/traces', sampling_rate: 2 }), ['config.sampling_rate: value should be between 0 and 1']);
  });
});
