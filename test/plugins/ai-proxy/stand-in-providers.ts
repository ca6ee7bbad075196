/**
 * Stand-ins for the LLM providers ai-proxy translates for (Azure, Cohere, Gemini, Hugging Face, Bedrock):
 * one local HTTP(S) server per provider that checks what it receives as the provider would (the path,
 * the auth, the body's shape) and answers with hand-written samples in the provider's documented format
 * (test/fixtures/ai-providers). A request the provider would refuse gets its refusal: 401 for wrong
 * auth, 403 for a wrong AWS signature, 404 for a path it does not serve, 400 for a body it cannot read.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { signatureProblem } from '../../helpers/aws-signature.ts';
import { testCertificate } from '../../fixtures/tls.ts';
import { awsEventStream, type StreamedEvent } from './aws-event-stream.ts';

const SAMPLES = resolve(import.meta.dirname, '../../fixtures/ai-providers');

/** A provider's sample answer, as bytes (test/fixtures/ai-providers/<provider>/<file>). */
export function providerSample(path: string): Buffer {
  return readFileSync(resolve(SAMPLES, path));
}

/** A provider's sample answer, parsed (for tests that compare against its content). */
export function providerSampleJson(path: string): any {
  return JSON.parse(providerSample(path).toString('utf8'));
}

export interface Received {
  method: string;
  /** The request target as sent (path and query). */
  url: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  body: any;
}

export interface ProviderStandIn {
  url: string;
  /** What it was sent, oldest first. */
  received: Received[];
  close(): Promise<void>;
}

/** How one provider answers a request it accepted (its path and auth already checked). */
type Answer = (req: Received, res: http.ServerResponse) => void | Promise<void>;

/** How a provider checks a request: why it refuses it (status and body), or undefined. */
type Check = (req: Received) => { status: number; body: unknown } | undefined;

async function startStandIn(routes: Record<string, Answer>, check: Check, { tls = false } = {}): Promise<ProviderStandIn> {
  const received: Received[] = [];
  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const url = new URL(req.url!, 'http://stand-in');
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        return json(res, 400, { error: { message: 'the body is not JSON' } });
      }
      const got: Received = { method: req.method!, url: req.url!, path: url.pathname, query: url.searchParams, headers: req.headers, raw, body };
      received.push(got);
      const refusal = check(got);
      if (refusal) return json(res, refusal.status, refusal.body);
      const answer = routes[url.pathname];
      if (!answer) return json(res, 404, { error: { message: `no such endpoint: ${url.pathname}` } });
      void Promise.resolve(answer(got, res)).catch(() => res.destroy());
    });
  };
  const server = tls ? https.createServer(await testCertificate(), onRequest) : http.createServer(onRequest);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  // Providers set cookies (Azure's and Cohere's load balancers do); Kong drops some providers' (ai-proxy's DROPS_SET_COOKIE).
  res.writeHead(status, { 'content-type': 'application/json', 'set-cookie': 'affinity=stand-in; Path=/' }).end(typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body));
}

/** Sends `bytes` in pieces of `size`, each written on its own turn, so that the gateway gets them apart. */
async function inPieces(res: http.ServerResponse, contentType: string, bytes: Buffer, size: number): Promise<void> {
  res.writeHead(200, { 'content-type': contentType });
  for (let at = 0; at < bytes.length; at += size) {
    res.write(bytes.subarray(at, at + size));
    await new Promise((r) => setTimeout(r, 1));
  }
  res.end();
}

/** A bearer key's check, with the provider's own 401 body. */
const bearer = (token: string, refusal: unknown): Check => (req) => (req.headers.authorization === `Bearer ${token}` ? undefined : { status: 401, body: refusal });

/** Azure OpenAI: OpenAI's answers, under a deployment's path, with `api-key` and `api-version`. */
export function startAzure(deployment: string, key: string): Promise<ProviderStandIn> {
  const base = `/openai/deployments/${deployment}`;
  return startStandIn(
    {
      [`${base}/chat/completions`]: (_req, res) => json(res, 200, providerSample('openai/chat-completion.json')),
      [`${base}/completions`]: (_req, res) => json(res, 200, providerSample('openai/completion.json')),
    },
    (req) => {
      if (req.headers['api-key'] !== key) return { status: 401, body: providerSample('openai/invalid-api-key.json') };
      if (!req.query.get('api-version')) return { status: 404, body: { error: { code: '404', message: 'Resource not found' } } };
      return undefined;
    },
  );
}

/** Cohere: /v1/chat (`message`, whole or as NDJSON) and /v1/generate, with a bearer key. */
export function startCohere(key: string): Promise<ProviderStandIn> {
  return startStandIn(
    {
      '/v1/chat': (req, res) => {
        if (typeof req.body.message !== 'string') return json(res, 400, { message: 'invalid request: message must be a string' });
        if (req.body.stream) return inPieces(res, 'application/stream+json', providerSample('cohere/chat-stream.ndjson'), 31);
        json(res, 200, providerSample('cohere/chat.json'));
      },
      '/v1/generate': (req, res) => {
        if (typeof req.body.prompt !== 'string') return json(res, 400, { message: 'invalid request: prompt must be a string' });
        json(res, 200, providerSample('cohere/generate.json'));
      },
    },
    bearer(key, { message: 'invalid api token' }),
  );
}

/** Gemini on Vertex AI (over TLS): generateContent, or streamGenerateContent's array, with the `key` query parameter. */
export function startGemini(modelPath: string, key: string): Promise<ProviderStandIn> {
  return startStandIn(
    {
      [`${modelPath}:generateContent`]: (req, res) => {
        const safety = req.body.contents?.some((c: any) => c.parts?.some((p: any) => p.text === 'unsafe'));
        json(res, 200, providerSample(`gemini/${safety ? 'blocked-for-safety' : 'generate-content'}.json`));
      },
      [`${modelPath}:streamGenerateContent`]: (_req, res) => inPieces(res, 'application/json', providerSample('gemini/stream-function-call.json'), 23),
    },
    (req) => (req.query.get('key') === key ? undefined : { status: 400, body: { error: { code: 400, message: 'API key not valid. Please pass a valid API key.', status: 'INVALID_ARGUMENT' } } }),
    { tls: true },
  );
}

/** Hugging Face: a model's text generation, and its OpenAI-compatible chat (whole or as SSE), with a bearer key. */
export function startHuggingFace(model: string, key: string): Promise<ProviderStandIn> {
  return startStandIn(
    {
      [`/models/${model}`]: (_req, res) => json(res, 200, providerSample('huggingface/generated-text.json')),
      [`/models/${model}/v1/chat/completions`]: (req, res) => {
        if (req.body.options?.wait_for_model === false) return json(res, 503, providerSample('huggingface/model-loading.json'));
        if (!req.body.stream) return json(res, 200, providerSample('huggingface/chat-completion.json'));
        return inPieces(res, 'text/event-stream', providerSample('huggingface/chat-stream.sse'), 17);
      },
    },
    bearer(key, { error: 'Invalid credentials in Authorization header' }),
  );
}

/** Bedrock's runtime: Converse and ConverseStream (AWS's event stream), every call's SigV4 signature checked. */
export function startBedrock(model: string, secrets: Record<string, string>): Promise<ProviderStandIn> {
  const base = `/model/${encodeURIComponent(model)}`;
  return startStandIn(
    {
      [`${base}/converse`]: (_req, res) => json(res, 200, providerSample('bedrock/converse.json')),
      [`${base}/converse-stream`]: (_req, res) => {
        const events: StreamedEvent[] = providerSampleJson('bedrock/converse-stream.json');
        return inPieces(res, 'application/vnd.amazon.eventstream', awsEventStream(events), 7);
      },
    },
    (req) => {
      const problem = signatureProblem(req, req.raw, secrets);
      return problem ? { status: 403, body: { message: problem } } : undefined;
    },
  );
}
