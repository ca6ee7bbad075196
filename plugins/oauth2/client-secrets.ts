/**
 * Checking confidential clients' secrets without letting anonymous callers spend the machine on it.
 *
 * - PBKDF2 (hashed secrets) runs on the plugin's own bounded worker pool (KdfPool), never on libuv's
 *   threads that the store needs.
 * - A secret that verified is remembered per credential as a keyed SHA-256 digest, so a client's next
 *   requests in this process cost no key derivation.
 * - After MAX_FAILURES failed authentications of a hashed-secret client within FAILURE_WINDOW_MS, no key
 *   is derived for it until that window ends: the remembered secret is still accepted, anything else is
 *   refused at once with LimitError.clientLocked. So a flood of guesses for one client costs ten
 *   derivations a minute, and the client itself keeps working.
 *
 * The failure counts are kept per process, not in the store: what they protect, this process's hashing
 * workers, is per process, and a store write per failed attempt would itself put anonymous load on the
 * store. With P processes a guesser gets P times the attempts, no real gain against a random secret.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { OAuth2Credential } from './credential-schema.ts';
import { LimitError } from './errors.ts';
import { KdfPool } from './kdf-pool.ts';
import { hashSecretAsync, needsRehash, safeEqual, verifySecretAsync } from './secret.ts';

const MAX_FAILURES = 10;
const FAILURE_WINDOW_MS = 60_000;

interface FailureWindow {
  count: number;
  endsAt: number;
}

export class ClientSecrets {
  private readonly pool = new KdfPool();
  private readonly derive = this.pool.derive.bind(this.pool);
  /** Per-process key of the remembered digests: they are worthless outside this process. */
  private readonly digestKey = randomBytes(32);
  /** Keyed by the credential object: a changed credential (a new secret) is a new object, remembering nothing. */
  private readonly verified = new WeakMap<OAuth2Credential, Buffer>();
  private readonly failures = new Map<string, FailureWindow>();

  /** True when `secret` is the credential's; LimitError while the client is locked or the pool is full. */
  async verify(credential: OAuth2Credential, secret: string): Promise<boolean> {
    if (!credential.hash_secret) return safeEqual(secret, credential.client_secret);
    const digest = createHmac('sha256', this.digestKey).update(secret).digest();
    const remembered = this.verified.get(credential);
    if (remembered && timingSafeEqual(remembered, digest)) return true;
    this.refuseWhileLocked(credential.id);
    const matches = await verifySecretAsync(secret, credential.client_secret, this.derive);
    if (matches) this.verified.set(credential, digest);
    else this.countFailure(credential.id);
    return matches;
  }

  /** The hash a verified secret is stored under again when its hash has outdated parameters; undefined if current. */
  async rehashed(credential: OAuth2Credential, secret: string): Promise<string | undefined> {
    return needsRehash(credential.client_secret) ? hashSecretAsync(secret, this.derive) : undefined;
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private refuseWhileLocked(credentialId: string): void {
    const window = this.currentWindow(credentialId);
    if (window && window.count >= MAX_FAILURES) throw LimitError.clientLocked(Math.ceil((window.endsAt - Date.now()) / 1000));
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
