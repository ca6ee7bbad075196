/**
 * oauth2's clients: the `oauth2_credentials` the core keeps (gateway.yaml's, read-only, and the admin
 * API's, persisted; see EntityDirectory) with the lookups the endpoints make, and the check of a client's
 * secret. A credential whose consumer no longer exists is absent everywhere.
 */
import {
  isHashedSecret,
  isUuid,
  safeEqual,
  SecretVerifier,
  type Consumer,
  type ConsumerDirectory,
  type KeptEntities,
  type RemovedListener,
  type Store,
} from '../../src/pdk/index.ts';
import type { OAuth2Credential } from './credential-schema.ts';

export class CredentialDirectory {
  private readonly secrets: SecretVerifier;

  constructor(
    private readonly entities: KeptEntities<OAuth2Credential>,
    store: Store,
    private readonly consumers: ConsumerDirectory,
  ) {
    this.secrets = new SecretVerifier(store);
  }

  /** Called whenever a credential disappears (deleted, by its consumer's deletion, or from the file). */
  onRemoved(listener: RemovedListener<OAuth2Credential>): void {
    this.entities.onRemoved(listener);
  }

  consumerOf(credential: OAuth2Credential): Consumer | undefined {
    return this.consumers.byId(credential.consumer.id);
  }

  byClientId(clientId: string): OAuth2Credential | undefined {
    return this.entities.find('client_id', clientId);
  }

  byId(id: string): OAuth2Credential | undefined {
    return this.entities.byId(id);
  }

  /** `byId`, or what the store holds when another process created it a moment ago (admin API). */
  currentById(id: string): Promise<OAuth2Credential | undefined> {
    return this.entities.currentById(id);
  }

  /** By the admin API's key: an id when UUID-shaped, else a client_id (Kong's endpoint-key rule). */
  find(idOrClientId: string): OAuth2Credential | undefined {
    return isUuid(idOrClientId) ? this.byId(idOrClientId) : this.byClientId(idOrClientId);
  }

  /**
   * Checks a confidential client's secret sent from `clientIp` (a hashed one through SecretVerifier: bounded
   * hashing, guesses throttled; RequestLimitError when refused unchecked). A runtime credential's hash of
   * older parameters is upgraded after a success.
   */
  async verifySecret(credential: OAuth2Credential, secret: unknown, clientIp: string): Promise<boolean> {
    if (typeof secret !== 'string') return false;
    if (!credential.hash_secret) return safeEqual(secret, credential.client_secret);
    if (!(await this.secrets.verify(credential, credential.client_secret, secret, clientIp))) return false;
    if (!this.entities.isDeclared(credential)) {
      const rehashed = await this.secrets.rehashed(credential.client_secret, secret);
      if (rehashed) await this.entities.save({ ...credential, client_secret: rehashed }, credential);
    }
    return true;
  }

  /** Kong's `hash_secret` transformation for an admin write: the PBKDF2 derivation runs on the worker pool. */
  async withHashedSecret(credential: Record<string, any>): Promise<Record<string, any>> {
    if (!credential.hash_secret || typeof credential.client_secret !== 'string' || isHashedSecret(credential.client_secret)) return credential;
    return { ...credential, client_secret: await this.secrets.hash(credential.client_secret) };
  }

  async close(): Promise<void> {
    await this.secrets.close();
  }
}
