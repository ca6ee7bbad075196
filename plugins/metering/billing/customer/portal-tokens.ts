/**
 * Consumer portal tokens (OpenMeter's): a bearer secret that lets one subject read its own usage of the
 * meters the token allows, and nothing else. Only a SHA-256 of the secret is stored (the token is shown
 * once, at creation); a presented token is found by its hash, so no secret is ever compared as text.
 * An invalidated or expired token fails as an unknown one; its hash entry expires with it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { ulid } from '../../shared/ids.ts';
import { formatInstant } from '../shared/calendar.ts';
import { invalid } from '../shared/errors.ts';
import { array, isObject, sealed, text, type Problems } from '../shared/fields.ts';
import { keys, PREFIXES, type BillingStore } from '../shared/store.ts';

export interface PortalToken {
  id: string;
  subject: string;
  /** Empty: every meter. */
  allowed_meter_slugs: string[];
  expires_at: string;
  created_at: string;
  invalidated_at: string | null;
}

export type PortalTokenDefinition = Pick<PortalToken, 'subject' | 'allowed_meter_slugs' | 'expires_at'>;

const TOKEN_PREFIX = 'om_portal_';
const DEFAULT_LIFETIME_MS = 24 * 3_600_000;
const MAX_LIFETIME_MS = 366 * 24 * 3_600_000;
const MAX_ALLOWED_METERS = 100;
/** Tokens one list answers at most. */
export const MAX_PORTAL_TOKEN_LIST = 1000;

const hashOf = (token: string) => createHash('sha256').update(token).digest('hex');

export function validatePortalToken(body: unknown, now = Date.now()): { definition?: PortalTokenDefinition; problems: Problems } {
  if (!isObject(body)) return { problems: [invalid('', 'request body must be a JSON object', 'type')] };
  const out: Problems = [];
  sealed(body, ['subject', 'allowed_meter_slugs', 'expires_at'], '', out);
  const subject = text(body, 'subject', '', { required: true, min: 1, max: 256 }, out);
  const meters = array(body, 'allowed_meter_slugs', '', out, { max: MAX_ALLOWED_METERS }) ?? [];
  meters.forEach((m, i) => {
    if (typeof m !== 'string' || m.length < 1 || m.length > 64) out.push(invalid(`allowed_meter_slugs[${i}]`, 'must be a meter slug', 'is_string'));
  });
  let expiresAt = now + DEFAULT_LIFETIME_MS;
  if (body.expires_at !== undefined && body.expires_at !== null) {
    expiresAt = typeof body.expires_at === 'string' ? Date.parse(body.expires_at) : NaN;
    if (!(expiresAt > now && expiresAt <= now + MAX_LIFETIME_MS)) out.push(invalid('expires_at', 'must be an RFC 3339 date-time in the future, within a year', 'is_date_time'));
  }
  if (out.length > 0) return { problems: out };
  return { definition: { subject: subject!, allowed_meter_slugs: meters as string[], expires_at: formatInstant(expiresAt) }, problems: out };
}

export const portalTokenExpired = (t: PortalToken, now = Date.now()) => t.invalidated_at !== null || Date.parse(t.expires_at) <= now;

export class PortalTokenService {
  constructor(private readonly db: BillingStore) {}

  /** The record, and the token itself (shown this once). */
  create(def: PortalTokenDefinition): Promise<{ record: PortalToken; token: string }> {
    const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
    return this.db.transact(async (tx) => {
      const record: PortalToken = { id: ulid(), ...def, created_at: formatInstant(Date.now()), invalidated_at: null };
      tx.put(keys.portalToken(record.id), record);
      tx.put(keys.portalTokenHash(hashOf(token)), JSON.stringify(record.id), Date.parse(def.expires_at) - Date.now());
      return { record, token };
    }, 'portal-token');
  }

  /** Newest first. */
  async list(limit: number): Promise<PortalToken[]> {
    return (await this.db.list<PortalToken>(PREFIXES.portalTokens)).reverse().slice(0, limit);
  }

  /** The live token a bearer secret is, if any. */
  async authenticate(token: string): Promise<PortalToken | undefined> {
    if (!token.startsWith(TOKEN_PREFIX) || token.length > 128) return undefined;
    const id = await this.db.get<string>(keys.portalTokenHash(hashOf(token)));
    const record = id === undefined ? undefined : await this.db.get<PortalToken>(keys.portalToken(id));
    return record && !portalTokenExpired(record) ? record : undefined;
  }

  /** Invalidates one token (`id`) or every token of a subject; neither: every token. */
  invalidate(filter: { id?: string; subject?: string }): Promise<void> {
    return this.db.transact(async (tx) => {
      const now = formatInstant(Date.now());
      const matches = (t: PortalToken) => (filter.id === undefined || t.id === filter.id) && (filter.subject === undefined || t.subject === filter.subject);
      for (const t of await this.db.list<PortalToken>(PREFIXES.portalTokens)) {
        if (t.invalidated_at !== null || !matches(t)) continue;
        const current = await tx.get<PortalToken>(keys.portalToken(t.id));
        if (current) tx.put(keys.portalToken(t.id), { ...current, invalidated_at: now });
      }
    }, 'portal-token');
  }
}
