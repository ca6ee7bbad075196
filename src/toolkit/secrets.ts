/**
 * Secrets and random values: Kong-compatible random strings, Kong's PBKDF2 secret hashes
 * (`$pbkdf2-sha512$i=10000,l=32$<salt>$<hash>`, kong/plugins/oauth2/secret.lua, so hashed secrets move
 * between Kong and Tollgate), and the sha256 digests under which bearer values (tokens, codes, API keys)
 * are stored.
 */
import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto';
import { nodeSecret } from '../process/node-secret.ts';

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** 248 = 4 × 62: bytes from 248 up are skipped so that every character is equally likely. */
const UNBIASED_BYTE_LIMIT = 248;

/** Up to `length` characters of [A-Za-z0-9] drawn from `bytes` (rejection sampling). */
export function alphanumericFrom(bytes: Uint8Array, length: number): string {
  let out = '';
  for (const byte of bytes) {
    if (out.length === length) break;
    if (byte < UNBIASED_BYTE_LIMIT) out += ALPHANUMERIC[byte % ALPHANUMERIC.length];
  }
  return out;
}

/** Random [A-Za-z0-9] characters, as Kong's `random_string` (32): client ids, secrets, provision keys. */
export function randomAlphanumeric(length = 32): string {
  let out = '';
  while (out.length < length) out += alphanumericFrom(randomBytes(length + 16), length - out.length);
  return out;
}

/**
 * An unguessable bearer value (tokens, refresh tokens, codes): 43 alphanumerics, 256 bits. Alphanumeric
 * like Kong's 32-character values (nothing to escape in redirect URIs), but longer.
 */
export function randomToken(): string {
  return randomAlphanumeric(43);
}

/** The key a token, refresh token or code is stored under: never the value itself. */
export function tokenDigest(value: string): string {
  return createHash('sha256').update(value).digest('base64url');
}

/** Constant-time string equality (compared as fixed-size digests, so lengths do not leak). */
export function safeEqual(a: string, b: string): boolean {
  const da = createHash('sha256').update(a).digest();
  const db = createHash('sha256').update(b).digest();
  return timingSafeEqual(da, db);
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

/** One PBKDF2 derivation, as a worker thread takes it. */
export interface Pbkdf2Job {
  secret: string;
  salt: Buffer;
  iterations: number;
  keyLength: number;
  digest: string;
}

/** Runs a derivation somewhere other than the event loop (the plugin's worker pool). */
export type Derive = (job: Pbkdf2Job) => Promise<Buffer>;

/** Kong's `secret.hash`: PBKDF2-HMAC-SHA512, 10 000 iterations, 32-byte key, PHC string. */
export function hashSecret(secret: string, salt: Buffer = randomBytes(PBKDF2_SALT_LENGTH)): string {
  const job = newHashJob(secret, salt);
  return formatHash(job, pbkdf2Sync(job.secret, job.salt, job.iterations, job.keyLength, job.digest));
}

/**
 * The hash of a secret declared in gateway.yaml, which every process of the node derives as it loads the
 * file: its salt is keyed with the node's secret (from `scope` and the secret), so every worker holds
 * (and its admin API shows) the same hash. A new secret, or another node, gets another salt.
 */
export function hashDeclaredSecret(secret: string, scope: string): string {
  return hashSecret(secret, createHmac('sha256', nodeSecret()).update(`${scope}\0${secret}`).digest().subarray(0, PBKDF2_SALT_LENGTH));
}

/** `hashSecret` with the derivation done by `derive`. */
export async function hashSecretAsync(secret: string, derive: Derive): Promise<string> {
  const job = newHashJob(secret, randomBytes(PBKDF2_SALT_LENGTH));
  return formatHash(job, await derive(job));
}

function newHashJob(secret: string, salt: Buffer): Pbkdf2Job {
  return { secret, salt, iterations: PBKDF2_ITERATIONS, keyLength: PBKDF2_KEY_LENGTH, digest: PBKDF2_DIGEST };
}

function formatHash(job: Pbkdf2Job, key: Buffer): string {
  return `${CURRENT_PREFIX}$${base64NoPad(job.salt)}$${base64NoPad(key)}`;
}

export function isHashedSecret(value: unknown): value is string {
  return typeof value === 'string' && PHC.test(value);
}

/** Kong's `secret.verify`: recompute with the hash's own parameters; constant-time comparison. */
export function verifySecret(secret: string, hash: string): boolean {
  const check = verificationOf(secret, hash);
  if (!check) return false;
  const { job, expected } = check;
  return keysEqual(pbkdf2Sync(job.secret, job.salt, job.iterations, job.keyLength, job.digest), expected);
}

/** `verifySecret` with the derivation done by `derive`, so that logins never block requests. */
export async function verifySecretAsync(secret: string, hash: string, derive: Derive): Promise<boolean> {
  const check = verificationOf(secret, hash);
  return check !== undefined && keysEqual(await derive(check.job), check.expected);
}

/** The derivation that checks `secret` against a PHC hash, and the key it must give; undefined for no hash. */
function verificationOf(secret: string, hash: string): { job: Pbkdf2Job; expected: Buffer } | undefined {
  const m = PHC.exec(hash);
  if (!m) return undefined;
  const iterations = Number(m[2]);
  const keyLength = Number(m[3]);
  // Bounds keep a hostile imported hash from stalling the process.
  if (iterations < 1 || iterations > 1_000_000 || keyLength < 1 || keyLength > 128) return undefined;
  return {
    job: { secret, salt: Buffer.from(m[4], 'base64'), iterations, keyLength, digest: m[1] },
    expected: Buffer.from(m[5], 'base64'),
  };
}

function keysEqual(key: Buffer, expected: Buffer): boolean {
  return expected.length === key.length && timingSafeEqual(key, expected);
}

/** Kong's `needs_rehash`: hashes of another algorithm/parameters are re-hashed after a successful login. */
export function needsRehash(hash: string): boolean {
  return !hash.startsWith(CURRENT_PREFIX);
}
