/**
 * The credential directory: the `oauth2_credentials` of gateway.yaml (read-only) and those created
 * through the admin API (persisted in the plugin's store, loaded at start). All lookups are in memory.
 * A credential whose consumer no longer exists is treated as absent everywhere.
 */
import { randomUUID } from 'node:crypto';
import { isUuid, type ConsumerDirectory, type Consumer, type Store } from '../../src/pipeline/plugin-api.ts';
import type { OAuth2Credential } from './credential-schema.ts';
import { ClientSecrets } from './client-secrets.ts';

const CREDENTIAL_PREFIX = 'cred:';

export class CredentialDirectory {
  private fileById = new Map<string, OAuth2Credential>();
  private fileByClientId = new Map<string, OAuth2Credential>();
  private readonly runtimeById = new Map<string, OAuth2Credential>();
  private readonly runtimeByClientId = new Map<string, OAuth2Credential>();
  private readonly secrets = new ClientSecrets();
  /** Called with the credential id whenever a credential is removed: ends its tokens and codes. */
  onRemoved: (credentialId: string) => Promise<void> = async () => {};

  constructor(
    private readonly store: Store,
    private readonly consumers: ConsumerDirectory,
  ) {}

  async load(): Promise<void> {
    for await (const [, value] of this.store.scan({ prefix: CREDENTIAL_PREFIX })) {
      this.index(JSON.parse(value) as OAuth2Credential);
    }
  }

  /** Replaces the credentials of gateway.yaml (on start and on every reload). */
  setFileCredentials(entities: Record<string, any>[]): void {
    const previous = this.fileById;
    this.fileById = new Map();
    this.fileByClientId = new Map();
    for (const raw of entities) {
      const credential = normalizeFileCredential(raw);
      this.fileById.set(credential.id, credential);
      this.fileByClientId.set(credential.client_id, credential);
    }
    // A reload does not wait for this (the tokens are refused at once anyway: no credential, no token);
    // the runtime logs a failure.
    for (const id of previous.keys()) if (!this.fileById.has(id)) this.onRemoved(id).catch(() => {});
  }

  isFromFile(credential: OAuth2Credential): boolean {
    return this.fileById.get(credential.id) === credential;
  }

  consumerOf(credential: OAuth2Credential): Consumer | undefined {
    return this.consumers.byId(credential.consumer.id);
  }

  byClientId(clientId: string): OAuth2Credential | undefined {
    const credential = this.fileByClientId.get(clientId) ?? this.runtimeByClientId.get(clientId);
    return credential && this.consumerOf(credential) ? credential : undefined;
  }

  byId(id: string): OAuth2Credential | undefined {
    const credential = this.fileById.get(id) ?? this.runtimeById.get(id);
    return credential && this.consumerOf(credential) ? credential : undefined;
  }

  /** By the admin API's key: an id when UUID-shaped, else a client_id (Kong's endpoint-key rule). */
  find(idOrClientId: string): OAuth2Credential | undefined {
    return isUuid(idOrClientId) ? this.byId(idOrClientId) : this.byClientId(idOrClientId);
  }

  list(): OAuth2Credential[] {
    return [...this.fileById.values(), ...this.runtimeById.values()].filter((c) => this.consumerOf(c));
  }

  /** Inserts or replaces a runtime credential (already validated, secret already hashed). */
  async save(credential: OAuth2Credential): Promise<void> {
    await this.store.put(CREDENTIAL_PREFIX + credential.id, JSON.stringify(credential), { sync: true });
    const previous = this.runtimeById.get(credential.id);
    if (previous) this.runtimeByClientId.delete(previous.client_id);
    this.index(credential);
  }

  /**
   * Deletes a runtime credential and, before resolving, its tokens and codes: once the admin API has
   * answered, nothing issued to it can come back, even under a new credential given the same id.
   */
  async remove(credential: OAuth2Credential): Promise<void> {
    await this.store.del(CREDENTIAL_PREFIX + credential.id, { sync: true });
    this.runtimeById.delete(credential.id);
    this.runtimeByClientId.delete(credential.client_id);
    await this.onRemoved(credential.id);
  }

  /** Kong's cascade: a consumer being deleted takes its runtime credentials (and their tokens) with it. */
  async removeOwnedBy(consumerId: string): Promise<void> {
    for (const credential of [...this.runtimeById.values()]) {
      if (credential.consumer.id === consumerId) await this.remove(credential);
    }
  }

  isClientIdTaken(clientId: string, exceptId?: string): boolean {
    const owner = this.fileByClientId.get(clientId) ?? this.runtimeByClientId.get(clientId);
    return owner !== undefined && owner.id !== exceptId;
  }

  isIdTaken(id: string): boolean {
    return this.fileById.has(id) || this.runtimeById.has(id);
  }

  /**
   * Checks a confidential client's secret (see ClientSecrets: bounded hashing, failure limits; LimitError
   * when refused unchecked). A runtime credential's hash of older parameters is upgraded after a success.
   */
  async verifySecret(credential: OAuth2Credential, secret: unknown): Promise<boolean> {
    if (typeof secret !== 'string') return false;
    if (!(await this.secrets.verify(credential, secret))) return false;
    if (credential.hash_secret && this.runtimeById.get(credential.id) === credential) {
      const rehashed = await this.secrets.rehashed(credential, secret);
      if (rehashed) await this.save({ ...credential, client_secret: rehashed });
    }
    return true;
  }

  close(): Promise<void> {
    return this.secrets.close();
  }

  private index(credential: OAuth2Credential): void {
    this.runtimeById.set(credential.id, credential);
    this.runtimeByClientId.set(credential.client_id, credential);
  }
}

function normalizeFileCredential(raw: Record<string, any>): OAuth2Credential {
  return {
    id: raw.id ?? randomUUID(),
    created_at: raw.created_at ?? Math.floor(Date.now() / 1000),
    consumer: raw.consumer,
    name: raw.name,
    client_id: raw.client_id,
    client_secret: raw.client_secret,
    hash_secret: raw.hash_secret ?? false,
    redirect_uris: raw.redirect_uris ?? null,
    tags: raw.tags ?? null,
    client_type: raw.client_type ?? 'confidential',
  };
}
