/**
 * Access tokens, refresh tokens and authorization codes. Only their sha256 digests are stored:
 *   acc:<digest(access token)>  → token row (JSON)
 *   ref:<digest(refresh token)> → access digest
 *   tid:<token id>              → access digest
 *   code:<digest(code)>         → code row (JSON), 5 minutes
 * every key of a token with the row's TTL, so the store's sweeper removes them together.
 *
 * Several processes and nodes share the store. Every write of a token's keys is a compare-and-set
 * (commitIf) on the row as it was read, and the keys it adds must be free; so of two concurrent changes of
 * one row exactly one applies: a refresh token is redeemed once cluster-wide (the redemption replaces or
 * renews the row it read), and a revocation racing a renewal retries on the renewed row instead of missing
 * it. Codes are written and taken only through commitIf too (putIfAbsent, take): one redemption wins.
 *
 * What this plugin holds in memory, and how another process or node stays in step with it:
 * - `found` and `missing` (below): LRU caches of rows and of digests known not to exist, so a warm token or
 *   a flood of bad ones never reaches the store. Every change of a row publishes its access digest(s) on the
 *   `tokens` notice topic and every process drops them (all of both caches on a `null` notice); a read
 *   that such a notice overtook is not cached. A chosen token value (admin API) is announced when created,
 *   so a process that looked it up before forgets that it was missing; a random one needs no notice, as no
 *   process can have looked it up before it was handed out.
 * - `pending`: store reads in flight, shared by concurrent misses on one digest; confined to one lookup.
 * - `storedForms`: the stored JSON of rows read here, the value a compare-and-set expects; weak, per row object.
 * - The credential directory (credentials.ts): the toolkit's entity directory, refreshed on its own
 *   notices; a credential removed in any process drops its rows from `found` (handler.ts).
 * - Per-process by design: the secret verifier's remembered digests and failure windows (its own comment
 *   says why), the cleanups handler.ts waits for on close, and what gateway.yaml configures (metadata
 *   routes, provision keys derived from the plugin id and a secret every node reads from the store).
 */
import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { putIfAbsent, randomToken, take, tokenDigest, type BatchOp, type Expectation, type Store } from '../../src/pdk/index.ts';

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

/** A code as read from the store: its row, and its stored value (what redeeming it expects to find still). */
export interface StoredCode {
  row: CodeRow;
  value: string;
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
/** The notice topic on which changed access digests are announced (space-separated). */
const CHANGES_TOPIC = 'tokens';
const CACHE_SIZE = 100_000;
const NEGATIVE_TTL_MS = 10 * 60 * 1000;

export function isExpired(row: TokenRow, now = Date.now()): boolean {
  return row.expires_in > 0 && now - row.issued_at > row.expires_in * 1000;
}

/** A chosen token value (admin API) belongs to another token already. */
export class TokenValueTakenError extends Error {
  override readonly name = 'TokenValueTakenError';
  readonly code = 'OAUTH2_TOKEN_VALUE_TAKEN';

  constructor(readonly field: 'access_token' | 'refresh_token') {
    super(`the ${field} value belongs to another token`);
  }
}

/** A cache miss being read from the store; `overtaken` once a change of its digest was announced meanwhile. */
interface PendingRead {
  row: Promise<TokenRow | undefined>;
  overtaken: boolean;
}

export class TokenStore {
  private readonly found = new LRUCache<string, TokenRow>({ max: CACHE_SIZE });
  private readonly missing = new LRUCache<string, true>({ max: CACHE_SIZE, ttl: NEGATIVE_TTL_MS });
  private readonly pending = new Map<string, PendingRead>();
  private readonly storedForms = new WeakMap<TokenRow, string>();
  private readonly unsubscribe: () => void;

  constructor(private readonly store: Store) {
    this.unsubscribe = store.notices.subscribe(CHANGES_TOPIC, (message) => {
      if (message === null) this.forgetAll();
      else for (const digest of message.split(' ')) this.forget(digest);
    });
  }

  /** Stops following other processes' changes (the gateway is closing). */
  close(): void {
    this.unsubscribe();
  }

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
    return (this.pending.get(digest) ?? this.startRead(digest)).row;
  }

  async findById(id: string): Promise<TokenRow | undefined> {
    const digest = await this.store.get('tid:' + id);
    return digest ? this.findByDigest(digest) : undefined;
  }

  /** The live row of a refresh token, read from the store (not the cache): what a redemption must go by. */
  async findByRefreshToken(refreshToken: string): Promise<TokenRow | undefined> {
    const digest = await this.store.get('ref:' + tokenDigest(refreshToken));
    return digest ? this.readLive(digest) : undefined;
  }

  /** A new token; TokenValueTakenError when a chosen value belongs to another token. */
  async issue(request: IssueRequest): Promise<IssuedToken> {
    const issued = newToken(request);
    if (!(await this.commit(undefined, issued.row, request.accessToken !== undefined))) {
      throw new TokenValueTakenError(await this.takenField(undefined, issued.row));
    }
    return issued;
  }

  /**
   * A refresh token's redemption without `reuse_refresh_token`: a new token replaces `row` in one step.
   * Undefined when the row changed since it was read (another redemption, a revocation): it was not redeemed.
   */
  async exchange(row: TokenRow, request: IssueRequest): Promise<IssuedToken | undefined> {
    const issued = newToken(request);
    return (await this.commit(row, issued.row)) ? issued : undefined;
  }

  /**
   * A redemption with `reuse_refresh_token`: the same row (and refresh token) gets a new access token and a
   * new lifetime. Undefined when the row changed since it was read (a concurrent redemption won).
   */
  async renewAccessToken(row: TokenRow, expiresIn: number, refreshTokenTtl: number): Promise<IssuedToken | undefined> {
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
    return (await this.commit(row, renewed)) ? { row: renewed, accessToken, refreshToken: null } : undefined;
  }

  /**
   * Replaces a row's fields (admin PATCH) on its current version; a new access token value re-keys it.
   * Undefined when the token is gone; TokenValueTakenError when a new value belongs to another token.
   */
  async update(row: TokenRow, changes: Partial<TokenRow>): Promise<TokenRow | undefined> {
    let current: TokenRow | undefined = row;
    while (current) {
      const updated: TokenRow = { ...current, ...changes, id: current.id };
      if (await this.commit(current, updated, updated.access_digest !== current.access_digest)) return updated;
      const latest = await this.readById(row.id);
      // Unchanged, so what failed is a new value's key: another token holds it.
      if (latest && this.storedForm(latest) === this.storedForm(current)) throw new TokenValueTakenError(await this.takenField(current, updated));
      current = latest;
    }
    return undefined;
  }

  /** Deletes the token, in whatever version it is now (a renewal may have re-keyed it since it was read). */
  async revoke(row: TokenRow): Promise<void> {
    for (let current: TokenRow | undefined = row; current; current = await this.readById(row.id)) {
      if (await this.commit(current, undefined)) return;
    }
  }

  /** Live rows in digest order, starting at `fromDigest` (the admin API's pagination offset). */
  async *list(fromDigest?: string): AsyncIterable<TokenRow> {
    const now = Date.now();
    const gte = fromDigest !== undefined ? 'acc:' + fromDigest : undefined;
    for await (const [, value] of this.store.scan({ prefix: 'acc:', gte })) {
      const row = this.parseRow(value);
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

  async findCode(code: string): Promise<StoredCode | undefined> {
    const value = await this.store.get(codeKey(code));
    return value === undefined ? undefined : { row: JSON.parse(value) as CodeRow, value };
  }

  /**
   * A code's redemption: the code is spent and its token issued in one synced compare-and-set. A
   * redemption cut short (the database restarting between the two) would otherwise spend the code and
   * issue nothing; this way it changes nothing and the client may try again, and an answered redemption
   * survives a crash of the database. Undefined when the code was spent meanwhile (another redemption won).
   */
  async redeemCode(code: string, stored: StoredCode, request: IssueRequest): Promise<IssuedToken | undefined> {
    const issued = newToken(request);
    return (await this.commit(undefined, issued.row, false, { key: codeKey(code), value: stored.value })) ? issued : undefined;
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

  /** Drops cached rows of a credential (deleted credential or consumer). */
  forgetCredential(credentialId: string): void {
    for (const [digest, row] of this.found.entries()) if (row.credential === credentialId) this.found.delete(digest);
  }

  /** Drops a digest from both caches (the row changed or is gone); a read in flight for it will not be cached. */
  private forget(digest: string): void {
    this.found.delete(digest);
    this.missing.delete(digest);
    const read = this.pending.get(digest);
    if (read) {
      read.overtaken = true;
      this.pending.delete(digest);
    }
  }

  /** Notices may have been lost: nothing cached can be trusted. */
  private forgetAll(): void {
    this.found.clear();
    this.missing.clear();
    for (const read of this.pending.values()) read.overtaken = true;
    this.pending.clear();
  }

  /** Forgets the digests here at once, in this node's other processes before it resolves, and on other nodes within `db_update_frequency`. */
  private announce(digests: string[]): Promise<void> {
    for (const digest of digests) this.forget(digest);
    return this.store.notices.publishAndWait(CHANGES_TOPIC, digests.join(' '));
  }

  private startRead(digest: string): PendingRead {
    const read: PendingRead = { row: Promise.resolve(undefined), overtaken: false };
    read.row = this.readRow(digest)
      .then((row) => {
        if (!read.overtaken) {
          if (row) this.found.set(digest, row);
          else this.missing.set(digest, true);
        }
        return row && this.alive(row, digest);
      })
      .finally(() => {
        if (this.pending.get(digest) === read) this.pending.delete(digest);
      });
    this.pending.set(digest, read);
    return read;
  }

  private alive(row: TokenRow, digest: string): TokenRow | undefined {
    if (row.row_expires_at !== null && row.row_expires_at <= Date.now()) {
      this.found.delete(digest);
      return undefined;
    }
    return row;
  }

  /** The row of an access digest as stored now, live or not (no cache). */
  private async readRow(digest: string): Promise<TokenRow | undefined> {
    const value = await this.store.get('acc:' + digest);
    return value === undefined ? undefined : this.parseRow(value);
  }

  private async readLive(digest: string): Promise<TokenRow | undefined> {
    const row = await this.readRow(digest);
    return row && this.alive(row, digest);
  }

  /** The current version of a token (renewals re-key it), read from the store. */
  private async readById(id: string): Promise<TokenRow | undefined> {
    const digest = await this.store.get('tid:' + id);
    return digest === undefined ? undefined : this.readRow(digest);
  }

  private parseRow(value: string): TokenRow {
    const row = JSON.parse(value) as TokenRow;
    this.storedForms.set(row, value);
    return row;
  }

  private storedForm(row: TokenRow): string {
    let form = this.storedForms.get(row);
    if (form === undefined) this.storedForms.set(row, (form = JSON.stringify(row)));
    return form;
  }

  /**
   * Replaces `current` (undefined: a new token) by `next` (undefined: deleted) in one compare-and-set:
   * `current` must still be stored as it was read, and every key `next` adds must be free. False when
   * another change came first. Announces the replaced digest, and `next`'s when its value was chosen (it may
   * have been looked up, and found missing, anywhere before); `next` is cached here. `spent`: a key that
   * must still hold its value, deleted in the same step (a redeemed code).
   */
  private async commit(current: TokenRow | undefined, next: TokenRow | undefined, nextChosen = false, spent?: Expectation): Promise<boolean> {
    const before = current ? tokenKeys(current) : [];
    const after = next ? tokenKeys(next) : [];
    const expectations: Expectation[] = after.filter((key) => !before.includes(key)).map((key) => ({ key, value: undefined }));
    const ops: BatchOp[] = before.filter((key) => !after.includes(key)).map((key) => ({ type: 'del', key }));
    if (current) expectations.push({ key: 'acc:' + current.access_digest, value: this.storedForm(current) });
    if (next) ops.push(...this.putsOf(next));
    if (spent) {
      expectations.push(spent);
      ops.push({ type: 'del', key: spent.key });
    }
    // A change of an existing row is synced: a crash must not bring back a redeemed or revoked token. So is
    // a redemption: its code is gone for good, and a crash must not take the token it was exchanged for.
    if (!(await this.store.commitIf(expectations, ops, { sync: current !== undefined || spent !== undefined }))) return false;
    const changed = [...(current ? [current.access_digest] : []), ...(next && nextChosen ? [next.access_digest] : [])];
    if (changed.length > 0) await this.announce(changed);
    if (next) this.found.set(next.access_digest, next);
    return true;
  }

  private putsOf(row: TokenRow): BatchOp[] {
    const ttlMs = row.row_expires_at === null ? undefined : Math.max(1, row.row_expires_at - Date.now());
    const ops: BatchOp[] = [
      { type: 'put', key: 'acc:' + row.access_digest, value: this.storedForm(row), ttlMs },
      { type: 'put', key: 'tid:' + row.id, value: row.access_digest, ttlMs },
    ];
    if (row.refresh_digest) ops.push({ type: 'put', key: 'ref:' + row.refresh_digest, value: row.access_digest, ttlMs });
    return ops;
  }

  /** Which chosen value made a write of `next` fail: its access token's key is taken, else its refresh token's. */
  private async takenField(current: TokenRow | undefined, next: TokenRow): Promise<'access_token' | 'refresh_token'> {
    const accessMoved = next.access_digest !== current?.access_digest;
    return accessMoved && (await this.store.get('acc:' + next.access_digest)) !== undefined ? 'access_token' : 'refresh_token';
  }
}

/** The store keys of a token. */
function tokenKeys(row: TokenRow): string[] {
  const keys = ['acc:' + row.access_digest, 'tid:' + row.id];
  if (row.refresh_digest) keys.push('ref:' + row.refresh_digest);
  return keys;
}

function newToken(request: IssueRequest): IssuedToken {
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
  return { row, accessToken, refreshToken };
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
