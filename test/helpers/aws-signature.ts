/**
 * Checks a received request's AWS SigV4 signature, computed here from AWS's documented algorithm with
 * node:crypto, independently of the gateway's signer: what stand-in AWS services (Lambda, Bedrock) use
 * to refuse a call signed wrongly.
 */
import { createHash, createHmac } from 'node:crypto';
import type http from 'node:http';

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();
const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const rfc3986 = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());

/** Why the call's signature is not the one `secret` makes, or undefined when it is. */
export function signatureProblem(req: Pick<http.IncomingMessage, 'method' | 'url' | 'headers'>, body: Buffer, secrets: Record<string, string>): string | undefined {
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
