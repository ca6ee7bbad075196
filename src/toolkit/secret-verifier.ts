/**
 * Checking hashed secrets (client secrets, passwords) without letting anonymous callers spend the machine
 * on it.
 *
 * - PBKDF2 runs on the process's bounded worker pool (KdfPool), never on libuv's threads that the store
 *   needs, and the pool is shared by every plugin that hashes.
 * - A secret that verified is remembered per credential object as a keyed SHA-256 digest, so a caller's
 *   next requests in this process cost no key derivation.
 * - After MAX_FAILURES failed checks of one credential within FAILURE_WINDOW_MS, no key is derived for it
 *   until that window ends: the remembered secret is still accepted, anything else is refused at once with
 *   RequestLimitError.credentialLocked. So a flood of guesses for one credential costs ten derivations a
 *   minute, and its owner keeps working.
 *
 * The failure counts are kept per process, not in the store: what they protect, this process's hashing
 * workers, is per process, and a store write per failed attempt would itself put anonymous load on the
 * store. With P processes a guesser gets P times the attempts, no real gain against a random secret.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { KdfPool } from './kdf-pool.ts';
import { RequestLimitError } from './limits.ts';
import { hashSecretAsync, needsRehash, verifySecretAsync } from './secrets.ts';

const MAX_FAILURES = 10;
const FAILURE_WINDOW_MS = 60_000;

interface FailureWindow {
  count: number;
  endsAt: number;
}

/** The process's one key-derivation pool, created on first use and ended when its last user closes. */
let shared: { pool: KdfPool; users: number } | undefined;

function acquirePool(): KdfPool {
  shared ??= { pool: new KdfPool(), users: 0 };
  shared.users++;
  return shared.pool;
}

async function releasePool(pool: KdfPool): Promise<void> {
  if (!shared || shared.pool !== pool || --shared.users > 0) return;
  shared = undefined;
  await pool.close();
}

export class SecretVerifier {
  private readonly pool = acquirePool();
  private readonly derive = this.pool.derive.bind(this.pool);
  private closed = false;
  /** Per-process key of the remembered digests: they are worthless outside this process. */
  private readonly digestKey = randomBytes(32);
  /** Keyed by the credential object: a changed credential (a new secret) is a new object, remembering nothing. */
  private readonly verified = new WeakMap<object, Buffer>();
  private readonly failures = new Map<string, FailureWindow>();

  /**
   * True when `given` is the secret whose PHC hash is `hash`, for `credential` (whose `id` keys the failure
   * count); RequestLimitError while the credential is locked or the pool is full.
   */
  async verify(credential: { id: string }, hash: string, given: string): Promise<boolean> {
    if (this.remembers(credential, given)) return true;
    this.refuseWhileLocked(credential.id);
    const digest = this.digestOf(given);
    const matches = await verifySecretAsync(given, hash, this.derive);
    if (matches) this.verified.set(credential, digest);
    else this.countFailure(credential.id);
    return matches;
  }

  /** True when `given` verified for this very credential object before, in this process: no derivation, no waiting. */
  remembers(credential: object, given: string): boolean {
    const remembered = this.verified.get(credential);
    return remembered !== undefined && timingSafeEqual(remembered, this.digestOf(given));
  }

  private digestOf(secret: string): Buffer {
    return createHmac('sha256', this.digestKey).update(secret).digest();
  }

  /** The PHC hash of `secret`, derived on the pool (RequestLimitError when it is full). */
  hash(secret: string): Promise<string> {
    return hashSecretAsync(secret, this.derive);
  }

  /** The hash a verified secret is stored under again when its hash has outdated parameters; undefined if current. */
  async rehashed(hash: string, secret: string): Promise<string | undefined> {
    return needsRehash(hash) ? this.hash(secret) : undefined;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await releasePool(this.pool);
  }

  private refuseWhileLocked(credentialId: string): void {
    const window = this.currentWindow(credentialId);
    if (window && window.count >= MAX_FAILURES) throw RequestLimitError.credentialLocked(Math.ceil((window.endsAt - Date.now()) / 1000));
  }

  private countFailure(credentialId: string): void {
    const window = this.currentWindow(credentialId);
    if (window) window.count++;
    else this.failures.set(credentialId, { count: 1, endsAt: Date.now() + FAILURE_WINDOW_MS });
  }

  /** The failure window still open for a credential, if any (a closed one is forgotten). */
  private currentWindow(credentialId: string): FailureWindow | undefined {
    const window = this.failures.get(credentialId);
    if (window && window.endsAt <= Date.now()) {
      this.failures.delete(credentialId);
      return undefined;
    }
    return window;
  }
}
