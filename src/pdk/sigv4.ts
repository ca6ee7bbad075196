/**
 * AWS Signature Version 4 (docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html)
 * with node:crypto: a canonical request of the method, path, query, the signed headers and the payload's
 * SHA-256, a string to sign over it, and the HMAC-SHA256 of that with a key derived from the secret, the
 * day, the region and the service. A few lines do not need a dependency (the AWS SDK's signer alone pulls
 * in a dozen packages).
 */
import { createHash, createHmac } from 'node:crypto';

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface AwsSignedRequest {
  method: string;
  host: string;
  /** The path as it goes on the wire (each segment already URI-encoded). */
  path: string;
  /** Query parameters (unencoded). */
  query: Record<string, string>;
  /** Headers to sign besides host and x-amz-date (lowercase names). */
  headers: Record<string, string>;
  body: Buffer;
}

/** RFC 3986 encoding, as SigV4 wants it: everything but unreserved characters. */
export function awsUriEncode(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** `20150830T123600Z` */
function amzDate(date: Date): string {
  return date.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
}

/** The request's headers with x-amz-date, the session token if any, and Authorization. */
export function signAwsRequest(request: AwsSignedRequest, credentials: AwsCredentials, region: string, service: string, now: Date): Record<string, string> {
  const stamp = amzDate(now);
  const day = stamp.slice(0, 8);
  const headers: Record<string, string> = { ...request.headers, host: request.host, 'x-amz-date': stamp };
  if (credentials.sessionToken) headers['x-amz-security-token'] = credentials.sessionToken;
  const names = Object.keys(headers).map((n) => n.toLowerCase()).sort();
  const lower = Object.fromEntries(Object.entries(headers).map(([n, v]) => [n.toLowerCase(), v]));
  const signedHeaders = names.join(';');
  const canonicalRequest = [
    request.method,
    // Not S3: the path's segments are encoded once more.
    request.path.split('/').map(awsUriEncode).join('/'),
    Object.entries(request.query).map(([k, v]) => [awsUriEncode(k), awsUriEncode(v)]).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${k}=${v}`).join('&'),
    names.map((n) => `${n}:${lower[n].trim().replace(/\s+/g, ' ')}\n`).join(''),
    signedHeaders,
    sha256Hex(request.body),
  ].join('\n');
  const scope = `${day}/${region}/${service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', stamp, scope, sha256Hex(canonicalRequest)].join('\n');
  const key = [day, region, service, 'aws4_request'].reduce<Buffer | string>((k, part) => hmac(k, part), `AWS4${credentials.secretAccessKey}`);
  const signature = hmac(key, stringToSign).toString('hex');
  return { ...headers, authorization: `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}` };
}

/** The credentials in the environment, as the AWS SDKs read them, or undefined. */
export function environmentAwsCredentials(): AwsCredentials | undefined {
  const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey, AWS_SESSION_TOKEN: sessionToken } = process.env;
  return accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey, sessionToken } : undefined;
}

function sha256Hex(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

function hmac(key: Buffer | string, data: string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}
