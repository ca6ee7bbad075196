/**
 * The plugin's own admin API: `oauth2_tokens` (by id or access token value), in the shapes of `oauth2`
 * (credentials, by id or client_id), which the core generates from the entity it keeps. Tokens are stored
 * hashed, so `access_token`/`refresh_token` values are shown only when created here.
 */
import {
  consumerByReference,
  ForeignKeyViolationError,
  headerValueProblem,
  isUuid,
  NotFoundError,
  pageSize,
  SchemaViolationError,
  tokenDigest,
  UniqueViolationError,
  validate,
  type AdminReply,
  type AdminRequest,
  type AdminRoute,
  type ConsumerDirectory,
  type RecordSchema,
} from '../../src/pdk/index.ts';
import type { CredentialDirectory } from './credentials.ts';
import { scopeTokenProblem } from './schema.ts';
import { TokenValueTakenError, type TokenRow, type TokenStore } from './tokens.ts';

export interface AdminDeps {
  credentials: CredentialDirectory;
  tokens: TokenStore;
  consumers: ConsumerDirectory;
}

export function adminRoutes(deps: AdminDeps): AdminRoute[] {
  const tokens = new TokenAdmin(deps);
  return [
    { method: 'GET', path: '/oauth2_tokens', handler: (req) => tokens.list(req) },
    { method: 'POST', path: '/oauth2_tokens', handler: (req) => tokens.create(req.body) },
    { method: 'DELETE', path: '/oauth2_tokens', handler: (req) => tokens.deleteMatching(req) },
    { method: 'GET', path: '/oauth2_tokens/:id', handler: (req) => tokens.get(req.params.id) },
    { method: 'PATCH', path: '/oauth2_tokens/:id', handler: (req) => tokens.patch(req.params.id, req.body) },
    { method: 'DELETE', path: '/oauth2_tokens/:id', handler: (req) => tokens.delete(req.params.id) },
  ];
}

/** `{id}` or a plain string. */
function referenceOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object') {
    const { id } = value as Record<string, unknown>;
    if (typeof id === 'string') return id;
  }
  return undefined;
}

const tokenFields: RecordSchema['fields'] = {
  credential: { type: 'any' },
  service: { type: 'any' },
  expires_in: { type: 'integer', between: [0, 100_000_000] },
  access_token: { type: 'string', len_min: 1 },
  refresh_token: { type: 'string', len_min: 1 },
  // Sent upstream as X-Authenticated-Userid and X-Authenticated-Scope.
  authenticated_userid: { type: 'string', custom: headerValueProblem },
  scope: { type: 'string', custom: scopeProblem },
  token_type: { type: 'string', one_of: ['bearer'] },
};

/** RFC 6749 §3.3: scope tokens separated by single spaces. */
function scopeProblem(scope: string): string | undefined {
  return scope.split(' ').map(scopeTokenProblem).find((problem) => problem !== undefined);
}

const tokenPatchSchema: RecordSchema = { type: 'record', fields: tokenFields };
const tokenCreateSchema: RecordSchema = {
  type: 'record',
  fields: { ...tokenFields, credential: { type: 'any', required: true }, expires_in: { ...tokenFields.expires_in, required: true } as any },
};

/** Only a token's digests are stored: its values are shown once, when created through this API. */
function tokenView(row: TokenRow, values: { access_token?: string; refresh_token?: string | null } = {}): Record<string, unknown> {
  const bound = (kind: string) => (row.binding?.startsWith(kind + ':') ? { id: row.binding.slice(kind.length + 1) } : null);
  return {
    id: row.id,
    created_at: row.created_at,
    credential: { id: row.credential },
    service: bound('service'),
    route: bound('route'),
    token_type: row.token_type,
    expires_in: row.expires_in,
    access_token: values.access_token ?? null,
    refresh_token: values.refresh_token ?? null,
    authenticated_userid: row.authenticated_userid,
    scope: row.scope,
  };
}

/** Kong's unique_violation when a chosen token value belongs to another token. */
async function uniqueValues<T>(values: Record<string, any>, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (err instanceof TokenValueTakenError) throw new UniqueViolationError({ [err.field]: values[err.field] });
    throw err;
  }
}

class TokenAdmin {
  constructor(private readonly deps: AdminDeps) {}

  async list(req: AdminRequest): Promise<AdminReply> {
    const matches = this.filter(req);
    if (!matches) throw new NotFoundError();
    const size = pageSize(req.query);
    const data: Record<string, unknown>[] = [];
    let next: string | null = null;
    for await (const row of this.deps.tokens.list(req.query.get('offset') ?? undefined)) {
      if (!matches(row)) continue;
      if (data.length === size) {
        const query = new URLSearchParams(req.query);
        query.set('offset', row.access_digest);
        query.set('size', String(size));
        next = `/oauth2_tokens?${query}`;
        break;
      }
      data.push(tokenView(row));
    }
    return { status: 200, body: { data, next } };
  }

  async get(key: string): Promise<AdminReply> {
    const row = await this.find(key);
    if (!row) throw new NotFoundError();
    return { status: 200, body: tokenView(row) };
  }

  async create(body: Record<string, any>): Promise<AdminReply> {
    const { value, issues } = validate<Record<string, any>>(tokenCreateSchema, body);
    if (issues.length) throw new SchemaViolationError(issues);
    const credential = await this.deps.credentials.currentById(referenceOf(value.credential) ?? '');
    if (!credential) throw new ForeignKeyViolationError('credential', 'oauth2_credentials', String(referenceOf(value.credential)));
    const service = referenceOf(value.service);
    const issued = await uniqueValues(value, () => this.deps.tokens.issue({
      credential: credential.id,
      binding: service ? `service:${service}` : null,
      scope: value.scope ?? null,
      authenticatedUserid: value.authenticated_userid ?? null,
      expiresIn: value.expires_in,
      withRefreshToken: false,
      refreshTokenTtl: 0,
      accessToken: value.access_token,
      refreshToken: value.refresh_token,
    }));
    return { status: 201, body: tokenView(issued.row, { access_token: issued.accessToken, refresh_token: issued.refreshToken }) };
  }

  async patch(key: string, body: Record<string, any>): Promise<AdminReply> {
    const row = await this.find(key);
    if (!row) throw new NotFoundError();
    const { value, issues } = validate<Record<string, any>>(tokenPatchSchema, body);
    if (issues.length) throw new SchemaViolationError(issues);
    const changes: Partial<TokenRow> = {};
    if (value.expires_in !== undefined) changes.expires_in = value.expires_in;
    if (value.scope !== undefined) changes.scope = value.scope;
    if (value.authenticated_userid !== undefined) changes.authenticated_userid = value.authenticated_userid;
    if (value.access_token !== undefined) changes.access_digest = tokenDigest(value.access_token);
    if (value.refresh_token !== undefined) changes.refresh_digest = tokenDigest(value.refresh_token);
    if (value.service !== undefined) changes.binding = referenceOf(value.service) ? `service:${referenceOf(value.service)}` : null;
    const updated = await uniqueValues(value, () => this.deps.tokens.update(row, changes));
    if (!updated) throw new NotFoundError();
    return { status: 200, body: tokenView(updated, { access_token: value.access_token, refresh_token: value.refresh_token }) };
  }

  /** Kong answers 204 whether or not the token existed. */
  async delete(key: string): Promise<AdminReply> {
    const row = await this.find(key);
    if (row) await this.deps.tokens.revoke(row);
    return { status: 204 };
  }

  /** Revokes every token of a credential, consumer or user (at least one filter, so nobody wipes all by accident). */
  async deleteMatching(req: AdminRequest): Promise<AdminReply> {
    if (!['credential', 'consumer', 'authenticated_userid'].some((f) => req.query.has(f))) {
      throw new SchemaViolationError([{ path: [], message: 'at least one of these filters is required: credential, consumer, authenticated_userid' }]);
    }
    const matches = this.filter(req);
    if (!matches) throw new NotFoundError();
    const revoked = await this.deps.tokens.revokeWhere(matches);
    return { status: 200, body: { revoked } };
  }

  /** By id when the key is UUID-shaped, else by the access token's value (Kong's endpoint-key rule). */
  private async find(key: string): Promise<TokenRow | undefined> {
    return isUuid(key) ? this.deps.tokens.findById(key) : this.deps.tokens.findByAccessToken(key);
  }

  /** Filters `credential` (id or client_id), `consumer` (id or username), `authenticated_userid`; undefined if one names nothing. */
  private filter(req: AdminRequest): ((row: TokenRow) => boolean) | undefined {
    const credentialRef = req.query.get('credential');
    const consumerRef = req.query.get('consumer');
    const userid = req.query.get('authenticated_userid');
    const credential = credentialRef !== null ? this.deps.credentials.find(credentialRef) : undefined;
    const consumer = consumerRef !== null ? consumerByReference(this.deps.consumers, consumerRef) : undefined;
    if ((credentialRef !== null && !credential) || (consumerRef !== null && !consumer)) return undefined;
    return (row) => {
      if (credential && row.credential !== credential.id) return false;
      if (consumer && this.deps.credentials.byId(row.credential)?.consumer.id !== consumer.id) return false;
      return userid === null || row.authenticated_userid === userid;
    };
  }
}
