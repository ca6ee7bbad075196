/**
 * Lambda's Invoke API (POST /2015-03-31/functions/{name}/invocations), SigV4-signed, over a kept-alive
 * agent per plugin instance; the whole answer read, bounded in size and time.
 */
import http from 'node:http';
import https from 'node:https';
import { awsUriEncode, signAwsRequest, type AwsCredentials } from '../../src/pdk/index.ts';
import { LambdaInvokeError } from './errors.ts';
import type { AwsLambdaConfig } from './schema.ts';

/** Lambda answers at most 6 MB synchronously; anything much larger is not Lambda's. */
const ANSWER_LIMIT = 16 * 2 ** 20;

export interface LambdaAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** Where an instance invokes, and how it connects (made once per configuration). */
export interface LambdaEndpoint {
  host: string;
  port: number;
  https: boolean;
  agent: http.Agent;
}

export function endpointOf(config: AwsLambdaConfig, region: string | undefined): LambdaEndpoint | undefined {
  const host = config.host ?? (region ? `lambda.${region}.amazonaws.com` : undefined);
  if (!host) return undefined;
  const secure = !config.disable_https;
  const options = { keepAlive: true, keepAliveMsecs: config.keepalive, timeout: config.keepalive };
  return { host, port: config.port ?? 443, https: secure, agent: secure ? new https.Agent(options) : new http.Agent(options) };
}

export function invoke(endpoint: LambdaEndpoint, config: AwsLambdaConfig, region: string, credentials: AwsCredentials, payload: Buffer): Promise<LambdaAnswer> {
  const path = `/2015-03-31/functions/${awsUriEncode(config.function_name ?? '')}/invocations`;
  const query: Record<string, string> = config.qualifier ? { Qualifier: config.qualifier } : {};
  const defaultPort = endpoint.https ? 443 : 80;
  const host = endpoint.port === defaultPort ? endpoint.host : `${endpoint.host}:${endpoint.port}`;
  const headers = signAwsRequest(
    {
      method: 'POST',
      host,
      path,
      query,
      headers: { 'content-type': 'application/x-amz-json-1.1', 'x-amz-invocation-type': config.invocation_type, 'x-amz-log-type': config.log_type },
      body: payload,
    },
    credentials,
    region,
    'lambda',
    new Date(),
  );
  const search = new URLSearchParams(query).toString();
  const client = endpoint.https ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(
      { host: endpoint.host, port: endpoint.port, method: 'POST', path: search ? `${path}?${search}` : path, headers: { ...headers, 'content-length': payload.length }, agent: endpoint.agent, timeout: config.timeout },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > ANSWER_LIMIT) return req.destroy(new LambdaInvokeError('the Lambda answer is too large'));
          chunks.push(chunk);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks, size) }));
        res.on('error', (err) => reject(new LambdaInvokeError(`the Lambda service's answer was cut short: ${err.message}`, { cause: err })));
      },
    );
    req.on('timeout', () => req.destroy(new LambdaInvokeError(`no answer from the Lambda service within ${config.timeout} ms`)));
    req.on('error', (err) => reject(err instanceof LambdaInvokeError ? err : new LambdaInvokeError(`cannot invoke the Lambda service: ${err.message}`, { cause: err })));
    req.end(payload);
  });
}
