/**
 * Access tokens, refresh tokens and authorization codes. Only their sha256 digests are stored:
 *   acc:<digest(access token)>  → token row (JSON)
 *   ref:<digest(refresh token)> → access digest
 *   tid:<token id>              → access digest
 *   code:<digest(code)>         → code row (JSON), 5 minutes, single use: written and taken only through
 *                                 the store's compare-and-set (commitIf), so one redemption wins cluster-wide
 * every key of a token with the row's TTL, so the store's sweeper removes them together.
 *
 * Validation on protected requests reads through two LRU caches (found rows, and digests known not to
 * exist, so a flood of bad tokens never reaches the store); concurrent misses on one digest share one
 * store read. Every change to a row goes through here and updates or drops its cache entry.
 */
import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { putIfAbsent, randomToken, take, tokenDigest, type BatchOp, type Store } from '../../src/pipeline/plugin-api.ts';

export interface TokenRow {
  id: string;
  /** Unix seconds, as Kong's `created_at`. */
  created_at: number;
  /** Milliseconds; the reference for `expires_in`. */
  issued_at: number;
  credential: string;
  /** What the token is bound to: `service:<id>`, `route:<id>` (service-less route), or null (global). */
  binding: string | null;
  token_type: 'bearer';
  /** Seconds; 0 = never expires. */
  expires_in: number;
  scope: string | null;
  authenticated_userid: string | null;
  access_digest: string;
  refresh_digest: string | null;
  /** When the whole row (and its refresh token) disappears, ms; null = kept. */
  row_expires_at: number | null;
}

export interface CodeRow {
  credential: string;
  binding: string | null;
  plugin: string;
  authenticated_userid: string;
  scope: string | null;
  challenge: string | null;
  challenge_method: 'S256' | null;
  redirect_uri: string;
}

export interface IssueRequest {
  credential: string;
  binding: string | null;
  scope: string | null;
  authenticatedUserid: string | null;
  /** Seconds (config `token_expiration`); 0 = never. */
  expiresIn: number;
  withRefreshToken: boolean;
  /** Seconds (config `refresh_token_ttl`); 0 = kept. */
  refreshTokenTtl: number;
  /** Chosen values (admin API); random otherwise. */
  accessToken?: string;
  refreshToken?: string;
}

export interface IssuedToken {
  row: TokenRow;
  accessToken: string;
  refreshToken: string | null;
}

const CODE_TTL_MS = 5 * 60 * 1000;
const CACHE_SIZE = 100_000;
const NEGATIVE_TTL_MS = 10 * 60 * 1000;

export function isExpired(row: TokenRow, now = Date.now()): boolean {
  return row.expires_in > 0 && now - row.issued_at > row.expires_in * 1000;
}

export class TokenStore {
  private readonly found = new LRUCache<string, TokenRow>({ max: CACHE_SIZE });
  private readonly missing = new LRUCache<string, true>({ max: CACHE_SIZE, ttl: NEGATIVE_TTL_MS });
  private readonly pending = new Map<string, Promise<TokenRow | undefined>>();
  /** Refresh tokens being redeemed right now: a concurrent second use fails. */
  private readonly redeeming = new Set<string>();

  constructor(private readonly store: Store) {}

  /** The live row of an access token, or undefined. No store read once the digest is cached. */
  async findByAccessToken(accessToken: string): Promise<TokenRow | undefined> {
    return this.findByDigest(tokenDigest(accessToken));
  }

  /** The live row of a digest when it is cached (no store read, no waiting); undefined otherwise. */
  cached(digest: string): TokenRow | undefined {
    const row = this.found.get(digest);
    return row && this.alive(row, digest);
  }

  async findByDigest(digest: string): Promise<TokenRow | undefined> {
    const cached = this.found.get(digest);
    if (cached) return this.alive(cached, digest);
    if (this.missing.has(digest)) return undefined;
    let read = this.pending.get(digest);
    if (!read) {
      read = this.readRow(digest).finally(() => this.pending.delete(digest));
      this.pending.set(digest, read);
    }
    return read;
  }

  async findById(id: string): Promise<TokenRow | undefined> {
    const digest = await this.store.get('tid:' + id);
    return digest ? this.findByDigest(digest) : undefined;
  }

  async findByRefreshToken(refreshToken: string): Promise<TokenRow | undefined> {
    const digest = await this.store.get('ref:' + tokenDigest(refreshToken));
    return digest ? this.findByDigest(digest) : undefined;
  }

  async issue(request: IssueRequest): Promise<IssuedToken> {
    const now = Date.now();
    const accessToken = request.accessToken ?? randomToken();
    const refreshToken = request.refreshToken ?? (request.withRefreshToken && request.expiresIn > 0 ? randomToken() : null);
    const row: TokenRow = {
      id: randomUUID(),
      created_at: Math.floor(now / 1000),
      issued_at: now,
      credential: request.credential,
      binding: request.binding,
      token_type: 'bearer',
      expires_in: request.expiresIn,
      scope: request.scope,
      authenticated_userid: request.authenticatedUserid,
      access_digest: tokenDigest(accessToken),
      refresh_digest: refreshToken ? tokenDigest(refreshToken) : null,
      row_expires_at: rowExpiry(now, request, refreshToken !== null),
    };
    await this.write(row);
    return { row, accessToken, refreshToken };
  }

  /** `reuse_refresh_token`: the same row (and refresh token) gets a new access token and a new lifetime. */
  async renewAccessToken(row: TokenRow, expiresIn: number, refreshTokenTtl: number): Promise<IssuedToken> {
    const now = Date.now();
    const accessToken = randomToken();
    const renewed: TokenRow = {
      ...row,
      created_at: Math.floor(now / 1000),
      issued_at: now,
      expires_in: expiresIn,
      access_digest: tokenDigest(accessToken),
      row_expires_at: rowExpiry(now, { expiresIn, refreshTokenTtl }, true),
    };
    await this.write(renewed, [{ type: 'del', key: 'acc:' + row.access_digest }]);
    this.forget(row.access_digest);
    return { row: renewed, accessToken, refreshToken: null };
  }

  /** Replaces a row's fields (admin PATCH); a new access token value re-keys it. */
  async update(row: TokenRow, changes: Partial<TokenRow>): Promise<TokenRow> {
    const updated = { ...row, ...changes, id: row.id };
    const extra: BatchOp[] = updated.access_digest !== row.access_digest ? [{ type: 'del', key: 'acc:' + row.access_digest }] : [];
    if (row.refresh_digest && updated.refresh_digest !== row.refresh_digest) extra.push({ type: 'del', key: 'ref:' + row.refresh_digest });
    await this.write(updated, extra);
    if (updated.access_digest !== row.access_digest) this.forget(row.access_digest);
    return updated;
  }

  async revoke(row: TokenRow): Promise<void> {
    const ops: BatchOp[] = [
      { type: 'del', key: 'acc:' + row.access_digest },
      { type: 'del', key: 'tid:' + row.id },
    ];
    if (row.refresh_digest) ops.push({ type: 'del', key: 'ref:' + row.refresh_digest });
    await this.store.batch(ops, { sync: true });
    this.forget(row.access_digest);
  }

  /** Live rows in digest order, starting at `fromDigest` (the admin API's pagination offset). */
  async *list(fromDigest?: string): AsyncIterable<TokenRow> {
    const now = Date.now();
    const gte = fromDigest !== undefined ? 'acc:' + fromDigest : undefined;
    for await (const [, value] of this.store.scan({ prefix: 'acc:', gte })) {
      const row = JSON.parse(value) as TokenRow;
      if (row.row_expires_at === null || row.row_expires_at > now) yield row;
    }
  }

  /** Revokes every token matching `predicate`; returns how many. */
  async revokeWhere(predicate: (row: TokenRow) => boolean): Promise<number> {
    const doomed: TokenRow[] = [];
    for await (const row of this.list()) if (predicate(row)) doomed.push(row);
    for (const row of doomed) await this.revoke(row);
    return doomed.length;
  }

  async saveCode(code: CodeRow): Promise<string> {
    const value = randomToken();
    // Not synced: a code lost in a crash only sends its user through the authorization again.
    await putIfAbsent(this.store, codeKey(value), JSON.stringify(code), { ttlMs: CODE_TTL_MS, sync: false });
    return value;
  }

  async findCode(code: string): Promise<CodeRow | undefined> {
    const value = await this.store.get(codeKey(code));
    return value === undefined ? undefined : (JSON.parse(value) as CodeRow);
  }

  /** Reads and deletes a code in one step: of several concurrent redemptions exactly one gets the row. */
  async takeCode(code: string): Promise<CodeRow | undefined> {
    const value = await take(this.store, codeKey(code));
    return value === undefined ? undefined : (JSON.parse(value) as CodeRow);
  }

  /** Ends everything issued to a credential: its tokens (and their refresh tokens) and its codes. */
  async revokeCredential(credentialId: string): Promise<void> {
    await this.revokeWhere((row) => row.credential === credentialId);
    for await (const [key, value] of this.store.scan({ prefix: 'code:' })) {
      if ((JSON.parse(value) as CodeRow).credential === credentialId) await take(this.store, key);
    }
  }

  /**
   * Runs `use` while holding a refresh token exclusively: a concurrent redemption of the same value gets
   * `undefined` instead of running, so each is redeemed at most once (in this process).
   */
  async redeemOnce<T>(secret: string, use: () => Promise<T>): Promise<T | undefined> {
    const key = tokenDigest(secret);
    if (this.redeeming.has(key)) return undefined;
    this.redeeming.add(key);
    try {
      return await use();
    } finally {
      this.redeeming.delete(key);
    }
  }

  /** Drops a digest from both caches (the row changed or is gone). */
  forget(digest: string): void {
    this.found.delete(digest);
    this.missing.delete(digest);
  }

  /** Drops cached rows of a credential (deleted credential or consumer). */
  forgetCredential(credentialId: string): void {
    for (const [digest, row] of this.found.entries()) if (row.credential === credentialId) this.found.delete(digest);
  }

  private alive(row: TokenRow, digest: string): TokenRow | undefined {
    if (row.row_expires_at !== null && row.row_expires_at <= Date.now()) {
      this.found.delete(digest);
      return undefined;
    }
    return row;
  }

  private async readRow(digest: string): Promise<TokenRow | undefined> {
    const value = await this.store.get('acc:' + digest);
    if (value === undefined) {
      this.missing.set(digest, true);
      return undefined;
    }
    const row = JSON.parse(value) as TokenRow;
    this.found.set(digest, row);
    return this.alive(row, digest);
  }

  private async write(row: TokenRow, extra: BatchOp[] = []): Promise<void> {
    const ttlMs = row.row_expires_at === null ? undefined : row.row_expires_at - Date.now();
    const ops: BatchOp[] = [
      ...extra,
      { type: 'put', key: 'acc:' + row.access_digest, value: JSON.stringify(row), ttlMs },
      { type: 'put', key: 'tid:' + row.id, value: row.access_digest, ttlMs },
    ];
    if (row.refresh_digest) ops.push({ type: 'put', key: 'ref:' + row.refresh_digest, value: row.access_digest, ttlMs });
    await this.store.batch(ops);
    this.missing.delete(row.access_digest);
    this.found.set(row.access_digest, row);
  }
}

function codeKey(code: string): string {
  return 'code:' + tokenDigest(code);
}

/**
 * How long a row lives. With a refresh token: `refresh_token_ttl` (Kong). Without one nothing can renew
 * the access token, so the row goes when the access token expires (Kong keeps it for
 * `refresh_token_ttl`; the difference is invisible to clients and keeps the store small).
 */
function rowExpiry(now: number, request: { expiresIn: number; refreshTokenTtl: number }, hasRefreshToken: boolean): number | null {
  if (request.expiresIn <= 0) return null;
  if (!hasRefreshToken) return now + request.expiresIn * 1000;
  return request.refreshTokenTtl > 0 ? now + request.refreshTokenTtl * 1000 : null;
}
