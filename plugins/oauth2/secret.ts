/**
 * Secrets and random values: Kong-compatible random strings, Kong's PBKDF2 client-secret hashes
 * (`$pbkdf2-sha512$i=10000,l=32$<salt>$<hash>`, so hashed secrets move between Kong and Tollgate),
 * and the sha256 digests under which tokens, refresh tokens and codes are stored.
 */
import { createHash, pbkdf2Sync, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** 32 random characters of [A-Za-z0-9] (Kong's `random_string`): client ids, secrets, provision keys. */
export function randomAlphanumeric(length = 32): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ALPHANUMERIC[randomInt(ALPHANUMERIC.length)];
  return out;
}

/** An unguessable bearer value (tokens, refresh tokens, codes): 32 random bytes, base64url (43 chars). */
export function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

/** The key a token, refresh token or code is stored under: never the value itself. */
export function tokenDigest(value: string): string {
  return createHash('sha256').update(value).digest('base64url');
}

/** Constant-time string equality (lengths are compared through fixed-size digests). */
export function safeEqual(a: string, b: string): boolean {
  const da = createHash('sha256').update(a).digest();
  const db = createHash('sha256').update(b).digest();
  return timingSafeEqual(da, db) && a.length === b.length;
}

const PBKDF2_DIGEST = 'sha512';
const PBKDF2_ITERATIONS = 10_000;
const PBKDF2_KEY_LENGTH = 32;
const PBKDF2_SALT_LENGTH = 16;
const CURRENT_PREFIX = `$pbkdf2-${PBKDF2_DIGEST}$i=${PBKDF2_ITERATIONS},l=${PBKDF2_KEY_LENGTH}`;
const PHC = /^\$pbkdf2-(sha256|sha384|sha512|sha1)\$i=(\d+),l=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/;

function base64NoPad(buf: Buffer): string {
  return buf.toString('base64').replace(/=+$/, '');
}

/** Kong's `secret.hash`: PBKDF2-HMAC-SHA512, 10 000 iterations, 32-byte key, PHC string. */
export function hashSecret(secret: string, salt: Buffer = randomBytes(PBKDF2_SALT_LENGTH)): string {
  const key = pbkdf2Sync(secret, salt, PBKDF2_ITERATIONS, PBKDF2_KEY_LENGTH, PBKDF2_DIGEST);
  return `${CURRENT_PREFIX}$${base64NoPad(salt)}$${base64NoPad(key)}`;
}

export function isHashedSecret(value: unknown): value is string {
  return typeof value === 'string' && PHC.test(value);
}

/** Kong's `secret.verify`: recompute with the hash's own parameters; constant-time comparison. */
export function verifySecret(secret: string, hash: string): boolean {
  const m = PHC.exec(hash);
  if (!m) return false;
  const [, digest, iterations, length, salt, expected] = m;
  const iterationCount = Number(iterations);
  const keyLength = Number(length);
  // Bounds keep a hostile imported hash from stalling the event loop.
  if (iterationCount < 1 || iterationCount > 1_000_000 || keyLength < 1 || keyLength > 128) return false;
  const key = pbkdf2Sync(secret, Buffer.from(salt, 'base64'), iterationCount, keyLength, digest);
  const want = Buffer.from(expected, 'base64');
  return want.length === key.length && timingSafeEqual(key, want);
}

/** Kong's `needs_rehash`: hashes of another algorithm/parameters are re-hashed after a successful login. */
export function needsRehash(hash: string): boolean {
  return !hash.startsWith(CURRENT_PREFIX);
}
