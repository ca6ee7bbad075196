/**
 * A stand-in for the AWS Lambda service's Invoke API (after Kong's spec/fixtures/aws-lambda.lua) that
 * first checks each call's SigV4 signature (test/helpers/aws-signature.ts, independent of the gateway's
 * signer): a call signed wrongly gets Lambda's 403. Then it answers by function name: `functionWithUnhandledError`, `functionWithEmptyArray`, `slowFunction`,
 * `functionReturningGiven` (answers the payload's `response` text), and by default echoes the payload.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { signatureProblem } from '../../helpers/aws-signature.ts';

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
