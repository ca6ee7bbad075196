/**
 * The session record and where it lives. The record is always sealed into the cookie (`storage: cookie`,
 * Kong's default). With `storage: kong` the store also keeps the ids of sessions logged out until they
 * would have expired anyway, so that a logout revokes the session even where a copy of its cookie lives on
 * (what Kong's server-side storage gives) — every process and node sees it. Kong keeps the whole record
 * server-side; here the data stays in the cookie, which the response phase writes without waiting for
 * the store.
 */
import { randomBytes } from 'node:crypto';
import type { Store } from '../../src/pdk/index.ts';
import type { Lifetime } from './lifetime.ts';
import { seal, unseal, type SealContext } from './sealed-cookie.ts';

export interface SessionRecord extends Lifetime {
  /** Random, 32 bytes in base64url. */
  id: string;
  consumerId: string;
  credentialId: string;
  groups: string[] | null;
  subject: string | null;
}

export interface SessionStorage {
  /** The live record a cookie value holds, or undefined. */
  load(context: SealContext, value: string): SessionRecord | undefined | Promise<SessionRecord | undefined>;
  /** Ends the session for good, where the storage can (`kong`); `liveForSeconds` bounds how long it could have lived. */
  revoke(record: SessionRecord, liveForSeconds: number): Promise<void>;
}

export function newSessionId(): string {
  return randomBytes(32).toString('base64url');
}

export function sealRecord(context: SealContext, record: SessionRecord): string {
  return seal(context, JSON.stringify(record));
}

export const cookieStorage: SessionStorage = {
  load: (context, value) => recordOf(unseal(context, value)),
  revoke: async () => undefined,
};

export function revocableStorage(store: Store): SessionStorage {
  const keyOf = (id: string) => `revoked/${id}`;
  return {
    async load(context, value) {
      const record = recordOf(unseal(context, value));
      return record && (await store.get(keyOf(record.id))) === undefined ? record : undefined;
    },
    async revoke(record, liveForSeconds) {
      await store.put(keyOf(record.id), '1', Number.isFinite(liveForSeconds) ? { ttlMs: Math.ceil(Math.max(1, liveForSeconds) * 1000) } : {});
    },
  };
}

/** A record read back: only what holds the secret seals one, but its shape is checked all the same. */
function recordOf(plaintext: string | undefined): SessionRecord | undefined {
  let record: Partial<SessionRecord> | null;
  try {
    record = plaintext === undefined ? null : JSON.parse(plaintext);
  } catch {
    return undefined;
  }
  if (!record || typeof record !== 'object') return undefined;
  const { id, consumerId, credentialId, createdAt, renewedAt, touchedAt } = record;
  if (typeof id !== 'string' || typeof consumerId !== 'string' || typeof credentialId !== 'string') return undefined;
  if (![createdAt, renewedAt, touchedAt].every((t) => typeof t === 'number')) return undefined;
  return record as SessionRecord;
}
