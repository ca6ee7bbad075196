/**
 * Checking hashed secrets (client secrets, passwords) without letting anonymous callers spend the machine
 * on it, nor deny a secret's owner.
 *
 * - PBKDF2 runs on the process's bounded worker pool (KdfPool), never on libuv's threads that the store
 *   needs, and the pool is shared by every plugin that hashes.
 * - A secret that verified is remembered per credential object as a digest keyed with a random key of
 *   this process (HMAC-SHA-256), so its owner's next requests cost no key derivation and pass whatever
 *   the throttle says. The digest never leaves the process: in the store, a fast digest of a password
 *   would be cheaper to attack than its PBKDF2 hash.
 * - Guesses are throttled by GuessThrottle: per client address first, per credential only past a far
 *   higher bound, and never so that the right secret stops being checked; a check from an address the
 *   credential verified from before goes ahead of the others on the pool.
 * - The same secret sent several times at once from one address is derived once: a client that opens
 *   many connections with a secret not yet remembered is neither slowed nor throttled by that.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Store } from '../store/store.ts';
import { GuessThrottle } from './guess-throttle.ts';
import { KdfPool } from './kdf-pool.ts';
import { hashSecretAsync, needsRehash, verifySecretAsync } from './secrets.ts';

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
  private readonly throttle: GuessThrottle;
  private closed = false;
  /** This process's key of the remembered digests. */
  private readonly digestKey = randomBytes(32);
  /** Keyed by the credential object: a changed credential (a new secret) is a new object, remembering nothing. */
  private readonly verified = new WeakMap<object, Buffer>();
  /** Checks in progress, by credential, address and secret: the same one sent again meanwhile waits for it. */
  private readonly inProgress = new Map<string, Promise<boolean>>();

  /** `store`: where guesses are counted (the plugin's own, shared by every process using it). */
  constructor(store: Store) {
    this.throttle = new GuessThrottle(store);
  }

  /**
   * True when `given` is the secret whose PHC hash is `hash`, for `credential` (whose `id` keys the
   * throttle's counts), sent from `clientIp`; RequestLimitError when the throttle refuses the check or the
   * pool is full.
   */
  async verify(credential: { id: string }, hash: string, given: string, clientIp: string): Promise<boolean> {
    if (this.remembers(credential, given, clientIp)) return true;
    const digest = this.digestOf(given);
    const key = `${credential.id}\0${clientIp}\0${hash}\0${digest.toString('base64')}`;
    let check = this.inProgress.get(key);
    if (!check) {
      check = this.check(credential, hash, given, clientIp, digest).finally(() => this.inProgress.delete(key));
      this.inProgress.set(key, check);
    }
    return check;
  }

  /**
   * True when `given` verified for this very credential object before, in this process: no derivation, no
   * waiting, no throttle (the owner of a remembered secret is never refused).
   */
  remembers(credential: { id: string }, given: string, clientIp: string): boolean {
    const remembered = this.verified.get(credential);
    if (remembered === undefined || !timingSafeEqual(remembered, this.digestOf(given))) return false;
    this.throttle.usedFrom(credential.id, clientIp);
    return true;
  }

  private async check(credential: { id: string }, hash: string, given: string, clientIp: string, digest: Buffer): Promise<boolean> {
    const matches = await this.throttle.guard(credential.id, clientIp, ({ knownAddress }) =>
      verifySecretAsync(given, hash, (job) => this.pool.derive(job, knownAddress)),
    );
    if (matches) this.verified.set(credential, digest);
    return matches;
  }

  private digestOf(secret: string): Buffer {
    return createHmac('sha256', this.digestKey).update(secret).digest();
  }

  /** The PHC hash of `secret`, derived on the pool ahead of anonymous checks (an operator's write); RequestLimitError when it is full. */
  hash(secret: string): Promise<string> {
    return hashSecretAsync(secret, (job) => this.pool.derive(job, true));
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
}
