/**
 * Standard Webhooks signatures (standardwebhooks.com), as Svix signs OpenMeter's deliveries: the headers
 * `webhook-id` (the event id: the same on every attempt, so the receiver dedupes on it),
 * `webhook-timestamp` (seconds, this attempt's) and `webhook-signature` = `v1,` + base64 of
 * HMAC-SHA256 over `<id>.<timestamp>.<body>`, keyed with the base64-decoded part of the channel's
 * `whsec_` secret.
 */
import { createHmac, randomBytes } from 'node:crypto';

const PREFIX = 'whsec_';
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const MIN_KEY_BYTES = 24;
const MAX_KEY_BYTES = 64;

function keyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
}

/** Whether a caller's secret is usable: base64 of 24 to 64 bytes, optionally prefixed with `whsec_`. */
export function isSigningSecret(secret: string): boolean {
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret;
  if (!BASE64.test(encoded) || encoded.length % 4 !== 0) return false;
  const bytes = keyOf(secret).length;
  return bytes >= MIN_KEY_BYTES && bytes <= MAX_KEY_BYTES;
}

/** A new secret for a channel created without one (OpenMeter's recommended size: 24 bytes). */
export function newSigningSecret(): string {
  return PREFIX + randomBytes(MIN_KEY_BYTES).toString('base64');
}

/** The three headers of one delivery attempt. */
export function signatureHeaders(secret: string, id: string, body: string, now = Date.now()): Record<string, string> {
  const timestamp = String(Math.floor(now / 1000));
  const signature = createHmac('sha256', keyOf(secret)).update(`${id}.${timestamp}.${body}`).digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1,${signature}` };
}
