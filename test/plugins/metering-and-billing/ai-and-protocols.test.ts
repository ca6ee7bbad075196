/**
 * Token metering against a fake OpenAI-compatible upstream, and the other protocols:
 * - a streamed (text/event-stream) completion reaches the client chunk by chunk (the upstream holds the
 *   rest back until the client has the first chunk: a gateway buffering the stream would wait forever),
 *   and its final usage chunk yields the kong.llm_request pair, summed by a meter grouped by model and type;
 * - a JSON completion small or far larger than what is kept of it (usage at its end, model at its start);
 * - no token events for compressed bodies or with meter_ai_token_usage off;
 * - a gRPC call and a WebSocket session are one kong.api_request each, with their duration and bytes.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { echoClient, startGrpcEcho, unary, type EchoClient, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { startWsEcho, type WsEcho } from '../../fixtures/ws-echo.ts';
import { ALICE, call, fixtureConfig, meteringApi, oauth2, tokenOf, type MeteringApi } from './support.ts';

const MODEL = 'gpt-4o-mini-2024-07-18';
const FAST = { queue: { max_coalescing_delay: 0.05 } };

/** Released by the test once the client has the stream's first chunk. */
let releaseStream: () => void = () => {};

/** A fake OpenAI chat completions API: JSON, gzipped JSON, or a stream whose last chunk carries the usage. */
function openAi(req: http.IncomingMessage, res: http.ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    const body = JSON.parse(Buffer.concat(chunks).toString() || '{}');
    const usage = { prompt_tokens: body.prompt ?? 11, completion_tokens: body.completion ?? 7, total_tokens: (body.prompt ?? 11) + (body.completion ?? 7) };
    if (body.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
      const chunk = (delta: string) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: MODEL, choices: [{ index: 0, delta: { content: delta } }], usage: null })}\n\n`;
      res.write(chunk('Hel'));
      await new Promise<void>((r) => (releaseStream = r));
      for (const part of ['lo', ' there', '!']) res.write(chunk(part));
      // The usage chunk split across two writes: the reader must join lines across chunks.
      const last = `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: MODEL, choices: [], usage })}\n\n`;
      res.write(last.slice(0, 40));
      res.write(last.slice(40) + 'data: [DONE]\n\n');
      return res.end();
    }
    const completion = JSON.stringify({
      id: 'c2', object: 'chat.completion', created: 1, model: MODEL,
      choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(body.size ?? 10) }, finish_reason: 'stop' }],
      usage,
    });
    if (body.gzip) return res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end(gzipSync(completion));
    res.writeHead(200, { 'content-type': 'application/json' }).end(completion);
  });
}

const TOKEN_METER = { key: 'llm_tokens', name: 'LLM tokens', event_type: 'kong.llm_request', aggregation: 'sum', value_property: '$.tokens', dimensions: { model: '$.model', type: '$.type' } };

async function tokenEvents(api: MeteringApi, requestId: string) {
  const request = await api.eventsWhen({ id: `${requestId}:request` }, 1);
  const response = await api.eventsWhen({ id: `${requestId}:response` }, 1);
  return { request: request[0]?.event, response: response[0]?.event };
}

describe('AI token metering', () => {
  let upstream: Upstream;
  let gw: TestGateway;
  let api: MeteringApi;
  let token: string;
  before(async () => {
    upstream = await startUpstream(openAi);
    gw = await startGateway(fixtureConfig({ upstream: upstream.url, plugin: FAST, meters: [TOKEN_METER] }));
    api = await meteringApi(gw.https);
    token = await tokenOf(gw.https, ALICE);
  });
  after(async () => {
    await gw.stop();
    await upstream.close();
  });

  test('a streamed completion flows to the client unbuffered, and its usage chunk is metered', async () => {
    const { id, text } = await new Promise<{ id: string; text: string }>((resolve, reject) => {
      const req = http.request(`${gw.http}/api/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          if (!text) releaseStream();
          text += chunk;
        });
        res.on('end', () => resolve({ id: res.headers['x-kong-request-id'] as string, text }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.setTimeout(5000, () => req.destroy(new Error('the stream was held back')));
      req.end(JSON.stringify({ model: MODEL, stream: true, stream_options: { include_usage: true } }));
    });
    assert.match(text, /data: \[DONE\]/);
    const { request, response } = await tokenEvents(api, id);
    assert.equal(request.type, 'kong.llm_request');
    assert.equal(request.subject, 'alice');
    assert.deepEqual(
      {
        type: request.data.type,
        tokens: request.data.tokens,
        model: request.data.model,
        provider: request.data.provider,
        http_status: request.data.http_status,
        api_request_id: request.data.api_request_id,
      },
      { type: 'request', tokens: 11, model: MODEL, provider: 'openai', http_status: 200, api_request_id: id },
    );
    assert.equal(response.data.type, 'response');
    assert.equal(response.data.tokens, 7);
    assert.equal((await api.eventsWhen({ id }, 1))[0].event.type, 'kong.api_request', 'and the request itself');
  });

  test('JSON completions, small and larger than what is kept of them, summed by model and type', async () => {
    const before = await api.queryOk('llm_tokens', { group_by_dimensions: ['model', 'type'] });
    const small = await call(gw.http, token, '/api/v1/chat/completions', { method: 'POST', body: JSON.stringify({ prompt: 100, completion: 20 }) });
    const large = await call(gw.http, token, '/api/v1/chat/completions', { method: 'POST', body: JSON.stringify({ prompt: 1000, completion: 3000, size: 200_000 }) });
    assert.ok(large.body.length > 200_000);
    for (const res of [small, large]) {
      const { request, response } = await tokenEvents(api, res.headers['x-kong-request-id'] as string);
      assert.equal(request.data.model, MODEL);
      assert.equal(request.data.tokens + response.data.tokens, res.json().usage.total_tokens);
    }
    const value = (r: typeof before, type: string) => Number(r.data.find((row) => row.dimensions.model === MODEL && row.dimensions.type === type)?.value ?? 0);
    const after = await api.queryWhen('llm_tokens', { group_by_dimensions: ['model', 'type'] }, (r) => value(r, 'response') - value(before, 'response') >= 3020);
    assert.equal(value(after, 'request') - value(before, 'request'), 1100);
    assert.equal(value(after, 'response') - value(before, 'response'), 3020);
  });

  test('a compressed body is passed on, without token events', async () => {
    const res = await call(gw.http, token, '/api/v1/chat/completions', { method: 'POST', body: JSON.stringify({ gzip: true }) });
    assert.equal(res.headers['content-encoding'], 'gzip');
    const id = res.headers['x-kong-request-id'] as string;
    await api.eventsWhen({ id }, 1);
    assert.equal((await api.listAllEvents({ id: `${id}:request` })).length, 0);
  });
});

test('meter_ai_token_usage off: the request is metered, its tokens are not', async () => {
  const upstream = await startUpstream(openAi);
  const gw = await startGateway(fixtureConfig({ upstream: upstream.url, plugin: { ...FAST, meter_ai_token_usage: false } }));
  try {
    const api = await meteringApi(gw.https);
    const res = await call(gw.http, await tokenOf(gw.https, ALICE), '/api/v1/chat/completions', { method: 'POST', body: '{}' });
    const id = res.headers['x-kong-request-id'] as string;
    await api.eventsWhen({ id }, 1);
    assert.equal((await api.listAllEvents({ id: `${id}:request` })).length, 0);
  } finally {
    await gw.stop();
    await upstream.close();
  }
});

describe('gRPC calls and WebSocket sessions', () => {
  let grpcUpstream: GrpcEcho;
  let wsUpstream: WsEcho;
  let httpUpstream: Upstream;
  let gw: TestGateway;
  let api: MeteringApi;
  let token: string;
  let client: EchoClient;
  before(async () => {
    [grpcUpstream, wsUpstream, httpUpstream] = await Promise.all([startGrpcEcho(), startWsEcho(), startUpstream()]);
    const plugins = [oauth2, { name: 'metering-and-billing', config: FAST }];
    gw = await startGateway(fixtureConfig({
      upstream: httpUpstream.url,
      plugin: FAST,
      services: [
        { name: 'echo', url: `grpc://127.0.0.1:${grpcUpstream.port}`, routes: [{ name: 'echo-grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'], plugins }] },
        { name: 'chat', url: `ws://127.0.0.1:${wsUpstream.port}`, routes: [{ name: 'chat', protocols: ['ws'], paths: ['/chat'], plugins }] },
      ],
    }));
    api = await meteringApi(gw.https);
    token = await tokenOf(gw.https, ALICE);
    client = echoClient(new URL(gw.h2c).host);
  });
  after(async () => {
    client.close();
    await gw.stop();
    await Promise.all([grpcUpstream.close(), wsUpstream.close(), httpUpstream.close()]);
  });

  test('a gRPC call is one event, with its bytes and duration', async () => {
    const { reply } = await unary(client, { message: 'hi', payload: Buffer.alloc(1000, 1), delay_ms: 50 }, { metadata: { authorization: `Bearer ${token}` } });
    assert.equal(reply.message, 'hi');
    const items = await api.eventsWhen({ subject: 'alice', type: 'kong.api_request' }, 1);
    const event = items.map((i) => i.event).find((e) => e.data.route_name === 'echo-grpc');
    assert.ok(event, 'the call was metered');
    assert.equal(event.data.request_protocol, 'grpc');
    assert.equal(event.data.service_protocol, 'grpc');
    assert.equal(event.data.response_http_status, 200);
    assert.ok(event.data.request_size_bytes > 1000, `request bytes ${event.data.request_size_bytes}`);
    assert.ok(event.data.response_size_bytes > 1000, `response bytes ${event.data.response_size_bytes}`);
    assert.ok(event.data.latency_ms >= 50, `duration ${event.data.latency_ms}`);
  });

  test('a WebSocket session is one event, when it ends, with its duration and the bytes of its frames', async () => {
    const ws = new WebSocket(`${gw.http.replace(/^http/, 'ws')}/chat`, { headers: { authorization: `Bearer ${token}` } });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    for (let i = 0; i < 5; i++) {
      ws.send('x'.repeat(500));
      await new Promise((r) => ws.once('message', r));
    }
    await new Promise((r) => setTimeout(r, 100));
    ws.close();
    await new Promise((r) => ws.once('close', r));
    const items = await api.eventsWhen({ subject: 'alice', type: 'kong.api_request' }, 2);
    const event = items.map((i) => i.event).find((e) => e.data.route_name === 'chat');
    assert.ok(event, 'the session was metered');
    assert.equal(event.data.request_protocol, 'ws');
    assert.equal(event.data.response_http_status, 101);
    assert.ok(event.data.request_size_bytes >= 2500, `bytes from the client ${event.data.request_size_bytes}`);
    assert.ok(event.data.response_size_bytes >= 2500, `bytes to the client ${event.data.response_size_bytes}`);
    assert.ok(event.data.latency_ms >= 100, `session duration ${event.data.latency_ms}`);
  });
});
