/**
 * ai-proxy translates a provider's answer in bounded memory: an event stream whose line never ends, or
 * a JSON answer past 16 MiB, is cut short (the client sees the answer end early, never a gateway
 * holding it all), and the gateway goes on serving. A provider that is not JSON where JSON is expected
 * gets Kong's "transformation failed" body.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { aroundTests, request, startGateway, startUpstream } from '../../helpers/gateway.ts';
import { MAX_EVENT_CHARS } from '../../../plugins/ai-proxy/framing.ts';
import { MAX_ANSWER_BYTES } from '../../../plugins/ai-proxy/translation.ts';

const CHAT = { messages: [{ role: 'user', content: 'hi' }] };

const env = aroundTests(async () => {
  // A misbehaving Anthropic: an endless first line, an oversized JSON answer, or text that is not JSON;
  // a Gemini whose streamed array has an endless element; a Bedrock whose event stream has impossible lengths.
  const provider = await startUpstream((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/endless-line') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: message_start\ndata: {"message":{"id":"m","role":"assistant","usage":{"input_tokens":1}}}\n\n');
        res.end(`data: ${'x'.repeat(MAX_EVENT_CHARS + 10)}`);
      } else if (req.url === '/huge') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`{"content":[{"type":"text","text":"${'y'.repeat(MAX_ANSWER_BYTES)}"}]}`);
      } else if (req.url === '/gemini-endless-element') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('[{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}]},\n');
        res.end(`{"candidates":[{"content":{"parts":[{"text":"${'z'.repeat(MAX_EVENT_CHARS + 10)}"}]}}]}]`);
      } else if (req.url === '/bedrock-bad-lengths') {
        res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream' });
        // A prelude whose headers are longer than its whole message.
        res.end(Buffer.from([0, 0, 0, 20, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]));
      } else res.writeHead(200, { 'content-type': 'application/json' }).end('not json');
    });
  });
  const route = (name: string) => ({
    name,
    paths: [`/${name}`],
    plugins: [{ name: 'ai-proxy', config: { route_type: 'llm/v1/chat', model: { provider: 'anthropic', name: 'c', options: { anthropic_version: '1', upstream_url: `${provider.url}/${name}` } } } }],
  });
  const gemini = {
    name: 'gemini-endless-element',
    paths: ['/gemini-endless-element'],
    plugins: [{ name: 'ai-proxy', config: { route_type: 'llm/v1/chat', model: { provider: 'gemini', name: 'g', options: { upstream_url: `${provider.url}/gemini-endless-element` } } } }],
  };
  const bedrock = {
    name: 'bedrock-bad-lengths',
    paths: ['/bedrock-bad-lengths'],
    plugins: [
      {
        name: 'ai-proxy',
        config: {
          route_type: 'llm/v1/chat',
          auth: { aws_access_key_id: 'AKID', aws_secret_access_key: 'secret' },
          model: { provider: 'bedrock', name: 'b', options: { bedrock: { aws_region: 'us-east-1' }, upstream_url: `${provider.url}/bedrock-bad-lengths` } },
        },
      },
    ],
  };
  const routes = [route('endless-line'), route('huge'), route('not-json'), gemini, bedrock];
  const gw = await startGateway({ services: [{ name: 'llm', url: provider.url, routes }] });
  return {
    gw,
    async close() {
      await gw.stop();
      await provider.close();
    },
  };
});

/** The answer's status (0: none arrived) and what arrived of its body, and whether it was cut short. */
function fetchUntilEnd(path: string, body: unknown): Promise<{ status: number; received: string; cut: boolean }> {
  return new Promise((resolve) => {
    const req = http.request(`${env.gw.http}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let received = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (received += c));
      res.on('end', () => resolve({ status: res.statusCode!, received, cut: false }));
      res.on('error', () => resolve({ status: res.statusCode!, received, cut: true }));
      res.on('aborted', () => resolve({ status: res.statusCode!, received, cut: true }));
    });
    // The connection reset before the head arrived: cut short too.
    req.on('error', () => resolve({ status: 0, received: '', cut: true }));
    req.end(JSON.stringify(body));
  });
}

test('a stream line longer than the limit cuts the answer short, after what was translated', async () => {
  const { status, received, cut } = await fetchUntilEnd('/endless-line', { ...CHAT, stream: true });
  assert.equal(status, 200);
  assert.equal(cut, true);
  assert.match(received, /^data: \{"choices":\[\{"delta":\{"content":"","role":"assistant"\}/);
  assert.ok(received.length < 10_000);
});

test("an element of Gemini's streamed array longer than the limit cuts the answer short, after what was translated", async () => {
  const { status, received, cut } = await fetchUntilEnd('/gemini-endless-element', { ...CHAT, stream: true });
  assert.equal(status, 200);
  assert.equal(cut, true);
  assert.match(received, /^data: \{"model":"g","object":"chat.completion.chunk","choices":\[\{"delta":\{"content":"Hi"/);
  assert.ok(received.length < 10_000);
});

test('a Bedrock event stream with impossible lengths cuts the answer short', async () => {
  const { received, cut } = await fetchUntilEnd('/bedrock-bad-lengths', { ...CHAT, stream: true });
  assert.equal(cut, true);
  assert.equal(received, '');
});

test('a JSON answer past the limit is cut short', async () => {
  const { cut, received } = await fetchUntilEnd('/huge', CHAT);
  assert.equal(cut, true);
  assert.equal(received, '');
});

test("an answer that is not JSON gets Kong's transformation error; the gateway goes on serving", async () => {
  const res = await request(`${env.gw.http}/not-json`, { method: 'POST', body: CHAT });
  assert.deepEqual(res.json(), { error: { message: 'transformation failed from type anthropic://llm/v1/chat: failed to decode anthropic response' } });
});
