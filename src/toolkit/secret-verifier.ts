/**
 * Checking hashed secrets (client secrets, passwords) without letting anonymous callers spend the machine
 * on it.
 *
 * - PBKDF2 runs on the process's bounded worker pool (KdfPool), never on libuv's threads that the store
 *   needs, and the pool is shared by every plugin that hashes.
 * - A secret that verified is remembered per credential object as a digest keyed with the node's secret
 *   (HMAC-SHA-256), so a caller's next requests in this process cost no key derivation; it is also put in
 *   the store, where the node's other processes find it while the credential is locked (below). Keyed
 *   with a secret that only the running node holds, the stored digest gives nothing to whoever reads the
 *   store.
 * - After MAX_FAILURES failed checks of one credential within FAILURE_WINDOW_MS, no key is derived for it
 *   until that window ends: the remembered secret is still accepted, anything else is refused at once with
 *   RequestLimitError.credentialLocked. So a flood of guesses for one credential costs ten derivations a
 *   minute, and its owner keeps working.
 *
 * The failure counts are kept in the store, so the limit holds for the whole node (every worker) and for
 * every node sharing the store: a guesser gets ten attempts a minute, whichever process answers. A
 * failed attempt costs one compare-and-set (after a key derivation that costs far more), and a locked
 * credential is remembered here until its window ends, so a flood against it reaches the store once.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { nodeSecret } from '../process/node-secret.ts';
import type { Store } from '../store/store.ts';
import { KdfPool } from './kdf-pool.ts';
import { RequestLimitError } from './limits.ts';
import { hashSecretAsync, needsRehash, verifySecretAsync } from './secrets.ts';

const MAX_FAILURES = 10;
const FAILURE_WINDOW_MS = 60_000;
/** Compare-and-set rounds of one failure count before it is left uncounted (only a storm of failures races so). */
const MAX_COUNT_ATTEMPTS = 5;
const FAILURES_PREFIX = 'secret-failures:';
/** A secret that verified on a node, per credential; the node's key is part of the name (nodes sharing a store have their own). */
const VERIFIED_PREFIX = 'secret-verified:';
/** Rewritten by every process's first verification of a credential; outlives any node run that matters. */
const VERIFIED_TTL_MS = 24 * 3600_000;

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
  /** The node's key of the remembered digests: they are worthless outside the running node. */
  private readonly digestKey = nodeSecret();
  /** Where this node's remembered digests are stored (one name per node key). */
  private readonly verifiedPrefix = VERIFIED_PREFIX + createHash('sha256').update(this.digestKey).digest('base64url').slice(0, 12) + ':';
  /** Keyed by the credential object: a changed credential (a new secret) is a new object, remembering nothing. */
  private readonly verified = new WeakMap<object, Buffer>();
  /** Credentials known to be locked: until when, and the digest the node remembers for it (read once per lock). */
  private readonly locked = new Map<string, { until: number; remembered: Buffer | undefined }>();

  /** `store`: where failures are counted (the plugin's own, shared by every process using it). */
  constructor(private readonly store: Store) {}

  /**
   * True when `given` is the secret whose PHC hash is `hash`, for `credential` (whose `id` keys the failure
   * count); RequestLimitError while the credential is locked or the pool is full.
   */
  async verify(credential: { id: string }, hash: string, given: string): Promise<boolean> {
    if (this.remembers(credential, given)) return true;
    const digest = this.digestOf(given);
    const rememberedKey = this.rememberedKey(credential.id, hash);
    const lock = await this.lockOf(credential.id, rememberedKey);
    if (lock) {
      // The node's other processes may have verified this very secret: its owner keeps working.
      if (lock.remembered?.length === digest.length && timingSafeEqual(lock.remembered, digest)) return this.remember(credential, digest);
      throw RequestLimitError.credentialLocked(Math.ceil((lock.until - Date.now()) / 1000));
    }
    const matches = await verifySecretAsync(given, hash, this.derive);
    if (!matches) {
      await this.countFailure(credential.id);
      return false;
    }
    await this.store.put(rememberedKey, digest.toString('base64'), { ttlMs: VERIFIED_TTL_MS });
    return this.remember(credential, digest);
  }

  private remember(credential: object, digest: Buffer): true {
    this.verified.set(credential, digest);
    return true;
  }

  /** Where the node remembers the secret that verified against `hash`: a new hash (a changed secret) is a new key. */
  private rememberedKey(credentialId: string, hash: string): string {
    return `${this.verifiedPrefix}${credentialId}:${createHash('sha256').update(hash).digest('base64url').slice(0, 16)}`;
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

  /** The credential's lock when it is locked now (read from the store once per lock). */
  private async lockOf(credentialId: string, rememberedKey: string): Promise<{ until: number; remembered: Buffer | undefined } | undefined> {
    let lock = this.locked.get(credentialId);
    if (!lock) {
      const [failures, remembered] = await this.store.getMany([FAILURES_PREFIX + credentialId, rememberedKey]);
      const window = parseWindow(failures);
      if (!window || window.count < MAX_FAILURES) return undefined;
      lock = { until: window.endsAt, remembered: remembered === undefined ? undefined : Buffer.from(remembered, 'base64') };
      this.locked.set(credentialId, lock);
    }
    if (lock.until > Date.now()) return lock;
    this.locked.delete(credentialId);
    return undefined;
  }

  /** One more failure in the credential's open window (a new window when none is open). */
  private async countFailure(credentialId: string): Promise<void> {
    const key = FAILURES_PREFIX + credentialId;
    for (let attempt = 0; attempt < MAX_COUNT_ATTEMPTS; attempt++) {
      const stored = await this.store.get(key);
      const now = Date.now();
      const open = parseWindow(stored);
      const window = open && open.endsAt > now ? { count: open.count + 1, endsAt: open.endsAt } : { count: 1, endsAt: now + FAILURE_WINDOW_MS };
      const ttlMs = Math.max(1, window.endsAt - now);
      if (await this.store.commitIf([{ key, value: stored }], [{ type: 'put', key, value: JSON.stringify(window), ttlMs }])) return;
    }
  }
}

function parseWindow(stored: string | undefined): FailureWindow | undefined {
  return stored === undefined ? undefined : (JSON.parse(stored) as FailureWindow);
}
