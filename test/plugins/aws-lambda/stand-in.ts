/**
 * A stand-in for the AWS Lambda service's Invoke API (after Kong's spec/fixtures/aws-lambda.lua) that
 * first checks each call's SigV4 signature itself, computed here from AWS's documented algorithm with
 * node:crypto, independently of the plugin's signer: a call signed wrongly gets Lambda's 403. Then it
 * answers by function name: `functionWithUnhandledError`, `functionWithEmptyArray`, `slowFunction`,
 * `functionReturningGiven` (answers the payload's `response` text), and by default echoes the payload.
 */
import { createHash, createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Invocation {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  payload: string;
}

export interface StandIn {
  port: number;
  invocations: Invocation[];
  close(): Promise<void>;
}

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();
const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const rfc3986 = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());

/** Why the call's signature is not the one `secret` makes, or undefined when it is. */
export function signatureProblem(req: http.IncomingMessage, body: Buffer, secrets: Record<string, string>): string | undefined {
  const auth = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(String(req.headers.authorization));
  if (!auth) return 'no SigV4 Authorization header';
  const [, keyId, day, region, service, signedHeaders, signature] = auth;
  const secret = secrets[keyId];
  if (!secret) return `unknown access key ${keyId}`;
  const date = String(req.headers['x-amz-date']);
  if (!date.startsWith(day)) return 'x-amz-date is not the credential scope day';
  const url = new URL(req.url!, 'http://stand-in');
  const query = [...url.searchParams].map(([k, v]) => `${rfc3986(k)}=${rfc3986(v)}`).sort().join('&');
  const names = signedHeaders.split(';');
  if (!names.includes('host')) return 'host is not signed';
  const canonical = [
    req.method,
    url.pathname.split('/').map(rfc3986).join('/'),
    query,
    names.map((n) => `${n}:${String(req.headers[n]).trim()}\n`).join(''),
    signedHeaders,
    sha256(body),
  ].join('\n');
  const scope = `${day}/${region}/${service}/aws4_request`;
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), region), service), 'aws4_request');
  const expected = hmac(key, ['AWS4-HMAC-SHA256', date, scope, sha256(canonical)].join('\n')).toString('hex');
  return expected === signature ? undefined : 'The request signature we calculated does not match the signature you provided.';
}

export async function startLambdaStandIn(secrets: Record<string, string>): Promise<StandIn> {
  const invocations: Invocation[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const problem = signatureProblem(req, body, secrets);
      if (problem) return res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ Message: problem }));
      const url = new URL(req.url!, 'http://stand-in');
      const payload = body.toString('utf8');
      invocations.push({ method: req.method!, path: url.pathname, query: url.searchParams, headers: req.headers, payload });
      const name = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/.exec(url.pathname)?.[1];
      if (!name) return res.writeHead(404).end();
      answer(decodeURIComponent(name), String(req.headers['x-amz-invocation-type']), payload, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    invocations,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

function answer(name: string, invocationType: string, payload: string, res: http.ServerResponse): void {
  const headers: http.OutgoingHttpHeaders = { 'x-amzn-requestid': 'foo' };
  if (name === 'functionWithUnhandledError') headers['x-amz-function-error'] = 'Unhandled';
  if (invocationType === 'Event') return void res.writeHead(202, headers).end();
  if (invocationType === 'DryRun') return void res.writeHead(204, headers).end();
  if (name === 'slowFunction') return void setTimeout(() => res.writeHead(200, headers).end('{}'), 2000);
  if (name === 'functionWithEmptyArray') return void res.writeHead(200, { ...headers, 'content-type': 'application/json' }).end('{"statusCode": 200, "testbody": [], "isBase64Encoded": false}');
  if (name === 'functionWithUnhandledError') return void res.writeHead(200, { ...headers, 'content-type': 'application/json' }).end('{"errorMessage":"boom"}');
  if (name === 'functionReturningGiven') return void res.writeHead(200, headers).end(String(JSON.parse(payload).response));
  res.writeHead(200, { ...headers, 'content-type': 'application/json' }).end(payload);
}
