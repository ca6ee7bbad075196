/**
 * Admin API routes, shaped as Kong's auto-generated ones: `oauth2` (credentials, by id or client_id) and
 * `oauth2_tokens` (by id or access token value), lists as `{data, next}`, errors as `{code, name, message, fields}`.
 * Credentials from gateway.yaml are read-only (405); runtime ones persist in the store.
 * Tokens are stored hashed, so `access_token`/`refresh_token` values are shown only when created here.
 */
import { randomUUID } from 'node:crypto';
import { validate, type Issue, type RecordSchema } from '../../src/config/schema.ts';
import { consumerByReference, headerValueProblem, isUuid, type AdminReply, type AdminRequest, type AdminRoute, type Consumer, type ConsumerDirectory } from '../../src/pipeline/plugin-api.ts';
import { applySecretHashing, credentialSchema, type OAuth2Credential } from './credential-schema.ts';
import type { CredentialDirectory } from './credentials.ts';
import { scopeTokenProblem } from './schema.ts';
import { tokenDigest } from './secret.ts';
import type { TokenRow, TokenStore } from './tokens.ts';

export interface AdminDeps {
  credentials: CredentialDirectory;
  tokens: TokenStore;
  consumers: ConsumerDirectory;
}

const DEFAULT_PAGE_SIZE = 100;
const MAX_PAGE_SIZE = 1000;
const NOT_FOUND: AdminReply = { status: 404, body: { message: 'Not Found' } };
const READ_ONLY: AdminReply = {
  status: 405,
  body: { message: 'this credential is declared in gateway.yaml and is read-only: change the file and reload' },
};

export function adminRoutes(deps: AdminDeps): AdminRoute[] {
  const credentials = new CredentialAdmin(deps);
  const tokens = new TokenAdmin(deps);
  return [
    { method: 'GET', path: '/oauth2', handler: (req) => credentials.list(req) },
    { method: 'POST', path: '/oauth2', handler: (req) => credentials.create(req.body) },
    { method: 'GET', path: '/oauth2/:id', handler: (req) => credentials.get(req.params.id) },
    { method: 'GET', path: '/oauth2/:id/consumer', handler: (req) => credentials.consumerOf(req.params.id) },
    { method: 'PUT', path: '/oauth2/:id', handler: (req) => credentials.put(req.params.id, req.body) },
    { method: 'PATCH', path: '/oauth2/:id', handler: (req) => credentials.patch(req.params.id, req.body) },
    { method: 'DELETE', path: '/oauth2/:id', handler: (req) => credentials.delete(req.params.id) },
    { method: 'GET', path: '/consumers/:consumer/oauth2', handler: (req) => credentials.list(req, req.params.consumer) },
    { method: 'POST', path: '/consumers/:consumer/oauth2', handler: (req) => credentials.create(req.body, req.params.consumer) },
    { method: 'GET', path: '/consumers/:consumer/oauth2/:id', handler: (req) => credentials.get(req.params.id, req.params.consumer) },
    { method: 'PUT', path: '/consumers/:consumer/oauth2/:id', handler: (req) => credentials.put(req.params.id, req.body, req.params.consumer) },
    { method: 'PATCH', path: '/consumers/:consumer/oauth2/:id', handler: (req) => credentials.patch(req.params.id, req.body, req.params.consumer) },
    { method: 'DELETE', path: '/consumers/:consumer/oauth2/:id', handler: (req) => credentials.delete(req.params.id, req.params.consumer) },
    { method: 'GET', path: '/oauth2_tokens', handler: (req) => tokens.list(req) },
    { method: 'POST', path: '/oauth2_tokens', handler: (req) => tokens.create(req.body) },
    { method: 'DELETE', path: '/oauth2_tokens', handler: (req) => tokens.deleteMatching(req) },
    { method: 'GET', path: '/oauth2_tokens/:id', handler: (req) => tokens.get(req.params.id) },
    { method: 'PATCH', path: '/oauth2_tokens/:id', handler: (req) => tokens.patch(req.params.id, req.body) },
    { method: 'DELETE', path: '/oauth2_tokens/:id', handler: (req) => tokens.delete(req.params.id) },
  ];
}

/** Kong's schema-violation answer: `fields` mirrors the input (arrays per element, `@entity` for checks). */
function schemaViolation(issues: Issue[]): AdminReply {
  const fields: Record<string, any> = {};
  for (const { path, message } of issues) {
    const [field, index] = path;
    if (field === undefined) (fields['@entity'] ??= []).push(message);
    else if (typeof index === 'number') {
      const list: (string | null)[] = (fields[field] ??= []);
      while (list.length < index) list.push(null);
      list[index] = message;
    } else fields[field] = message;
  }
  const parts = issues.map(({ path, message }) => `${path.length ? path.filter((p) => typeof p === 'string').join('.') : '@entity'}: ${message}`);
  const message = issues.length === 1 ? `schema violation (${parts[0]})` : `${issues.length} schema violations (${parts.join('; ')})`;
  return { status: 400, body: { code: 2, name: 'schema violation', message, fields } };
}

function uniqueViolation(field: string, value: string): AdminReply {
  return {
    status: 409,
    body: { code: 5, name: 'unique constraint violation', message: `UNIQUE violation detected on '{${field}="${value}"}'`, fields: { [field]: value } },
  };
}

function foreignKeyViolation(entity: string, ref: string): AdminReply {
  return {
    status: 400,
    body: { code: 4, name: 'foreign key violation', message: `the foreign key '{id="${ref}"}' does not reference an existing '${entity}' entity.` },
  };
}

/** `{id}`, `{username}` or a plain string. */
function referenceOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object') {
    const { id, username } = value as Record<string, unknown>;
    if (typeof id === 'string') return id;
    if (typeof username === 'string') return username;
  }
  return undefined;
}

/** The consumer a body's `consumer` field names: `{id}` by id only, `{username}` by username only, a string by Kong's rule. */
function consumerOfField(consumers: ConsumerDirectory, value: unknown): Consumer | undefined {
  if (typeof value === 'string') return consumerByReference(consumers, value);
  const { id, username } = (value ?? {}) as Record<string, unknown>;
  if (typeof id === 'string') return consumers.byId(id);
  return typeof username === 'string' ? consumers.byUsername(username) : undefined;
}

function pageSize(req: AdminRequest): number {
  const size = Number(req.query.get('size') ?? DEFAULT_PAGE_SIZE);
  return Number.isInteger(size) && size > 0 ? Math.min(size, MAX_PAGE_SIZE) : DEFAULT_PAGE_SIZE;
}

function credentialView(credential: OAuth2Credential): Record<string, unknown> {
  const { id, created_at, consumer, name, client_id, client_secret, hash_secret, redirect_uris, tags, client_type } = credential;
  return { id, created_at, consumer, name, client_id, client_secret, hash_secret, redirect_uris, tags, client_type };
}

class CredentialAdmin {
  constructor(private readonly deps: AdminDeps) {}

  list(req: AdminRequest, consumerRef?: string): AdminReply {
    const consumer = consumerRef === undefined ? undefined : consumerByReference(this.deps.consumers, consumerRef);
    if (consumerRef !== undefined && !consumer) return NOT_FOUND;
    const clientId = req.query.get('client_id');
    if (clientId !== null) {
      // The authorization page's question: which application and developer is this client_id?
      const credential = this.deps.credentials.byClientId(clientId);
      const owner = credential ? this.deps.credentials.consumerOf(credential) : undefined;
      const matches = credential && owner && (!consumer || owner.id === consumer.id);
      return { status: 200, body: { data: matches ? [{ ...credentialView(credential), consumer: owner }] : [], next: null } };
    }
    const all = this.deps.credentials.list().filter((c) => !consumer || c.consumer.id === consumer.id);
    const offset = Math.max(0, Number(req.query.get('offset') ?? 0) || 0);
    const size = pageSize(req);
    const next = offset + size < all.length ? `${consumer ? `/consumers/${consumer.id}` : ''}/oauth2?offset=${offset + size}&size=${size}` : null;
    return { status: 200, body: { data: all.slice(offset, offset + size).map(credentialView), next, ...(next ? { offset: String(offset + size) } : {}) } };
  }

  get(key: string, consumerRef?: string): AdminReply {
    const found = this.scoped(key, consumerRef);
    return found ? { status: 200, body: credentialView(found) } : NOT_FOUND;
  }

  consumerOf(key: string): AdminReply {
    const found = this.deps.credentials.find(key);
    const consumer = found ? this.deps.credentials.consumerOf(found) : undefined;
    return consumer ? { status: 200, body: consumer } : NOT_FOUND;
  }

  async create(body: Record<string, any>, consumerRef?: string): Promise<AdminReply> {
    if (consumerRef !== undefined && !consumerByReference(this.deps.consumers, consumerRef)) return NOT_FOUND;
    return this.write(body, { consumerRef, status: 201 });
  }

  /** Upsert by id or client_id (Kong's PUT on the endpoint key). */
  async put(key: string, body: Record<string, any>, consumerRef?: string): Promise<AdminReply> {
    if (consumerRef !== undefined && !consumerByReference(this.deps.consumers, consumerRef)) return NOT_FOUND;
    const existing = this.scoped(key, consumerRef);
    if (existing && this.deps.credentials.isFromFile(existing)) return READ_ONLY;
    const input = isUuid(key) ? { ...body, id: key } : { ...body, client_id: key };
    return this.write(input, { consumerRef, existing, status: 200 });
  }

  async patch(key: string, body: Record<string, any>, consumerRef?: string): Promise<AdminReply> {
    const existing = this.scoped(key, consumerRef);
    if (!existing) return NOT_FOUND;
    if (this.deps.credentials.isFromFile(existing)) return READ_ONLY;
    // Kong's transformation needs both: a lone secret or a lone flag cannot say how to store it.
    if (('client_secret' in body) !== ('hash_secret' in body)) {
      return schemaViolation([{ path: [], message: "all or none of these fields must be set: 'hash_secret', 'client_secret'" }]);
    }
    const { id, created_at, consumer, ...current } = existing;
    return this.write({ ...current, consumer, ...body }, { existing, status: 200 });
  }

  async delete(key: string, consumerRef?: string): Promise<AdminReply> {
    const existing = this.scoped(key, consumerRef);
    if (!existing) return NOT_FOUND;
    if (this.deps.credentials.isFromFile(existing)) return READ_ONLY;
    await this.deps.credentials.remove(existing);
    return { status: 204 };
  }

  /** By id or client_id; under `/consumers/{c}/…` only that consumer's. */
  private scoped(key: string, consumerRef?: string): OAuth2Credential | undefined {
    const found = this.deps.credentials.find(key);
    if (!found || consumerRef === undefined) return found;
    const consumer = consumerByReference(this.deps.consumers, consumerRef);
    return consumer && found.consumer.id === consumer.id ? found : undefined;
  }

  private async write(
    body: Record<string, any>,
    options: { consumerRef?: string; existing?: OAuth2Credential; status: number },
  ): Promise<AdminReply> {
    const { id, consumer: consumerField, ...fields } = body;
    const consumerRef = options.consumerRef ?? referenceOf(consumerField);
    const consumer = options.consumerRef !== undefined ? consumerByReference(this.deps.consumers, options.consumerRef) : consumerOfField(this.deps.consumers, consumerField);
    const validated = validate<Record<string, any>>(credentialSchema, fields);
    const issues = [...validated.issues];
    if (consumerRef === undefined) issues.unshift({ path: ['consumer'], message: 'required field missing' });
    if (id !== undefined && (typeof id !== 'string' || !isUuid(id))) issues.push({ path: ['id'], message: 'expected a valid UUID' });
    if (issues.length) return schemaViolation(issues);
    if (!consumer) return foreignKeyViolation('consumers', consumerRef!);
    const credentialId = options.existing?.id ?? id ?? randomUUID();
    if (!options.existing && this.deps.credentials.isIdTaken(credentialId)) return uniqueViolation('id', credentialId);
    const value = validated.value;
    if (this.deps.credentials.isClientIdTaken(value.client_id, credentialId)) return uniqueViolation('client_id', value.client_id);
    const credential = applySecretHashing<OAuth2Credential>({
      id: credentialId,
      created_at: options.existing?.created_at ?? Math.floor(Date.now() / 1000),
      consumer: { id: consumer.id },
      name: value.name,
      client_id: value.client_id,
      client_secret: value.client_secret,
      hash_secret: value.hash_secret,
      redirect_uris: value.redirect_uris ?? null,
      tags: value.tags ?? null,
      client_type: value.client_type,
    });
    await this.deps.credentials.save(credential);
    return { status: options.status, body: credentialView(credential) };
  }
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

class TokenAdmin {
  constructor(private readonly deps: AdminDeps) {}

  async list(req: AdminRequest): Promise<AdminReply> {
    const matches = this.filter(req);
    if (!matches) return NOT_FOUND;
    const size = pageSize(req);
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
    return row ? { status: 200, body: tokenView(row) } : NOT_FOUND;
  }

  async create(body: Record<string, any>): Promise<AdminReply> {
    const { value, issues } = validate<Record<string, any>>(tokenCreateSchema, body);
    if (issues.length) return schemaViolation(issues);
    const credential = this.deps.credentials.byId(referenceOf(value.credential) ?? '');
    if (!credential) return foreignKeyViolation('oauth2_credentials', String(referenceOf(value.credential)));
    if (value.access_token && (await this.deps.tokens.findByAccessToken(value.access_token))) {
      return uniqueViolation('access_token', value.access_token);
    }
    const service = referenceOf(value.service);
    const issued = await this.deps.tokens.issue({
      credential: credential.id,
      binding: service ? `service:${service}` : null,
      scope: value.scope ?? null,
      authenticatedUserid: value.authenticated_userid ?? null,
      expiresIn: value.expires_in,
      withRefreshToken: false,
      refreshTokenTtl: 0,
      accessToken: value.access_token,
      refreshToken: value.refresh_token,
    });
    return { status: 201, body: tokenView(issued.row, { access_token: issued.accessToken, refresh_token: issued.refreshToken }) };
  }

  async patch(key: string, body: Record<string, any>): Promise<AdminReply> {
    const row = await this.find(key);
    if (!row) return NOT_FOUND;
    const { value, issues } = validate<Record<string, any>>(tokenPatchSchema, body);
    if (issues.length) return schemaViolation(issues);
    const changes: Partial<TokenRow> = {};
    if (value.expires_in !== undefined) changes.expires_in = value.expires_in;
    if (value.scope !== undefined) changes.scope = value.scope;
    if (value.authenticated_userid !== undefined) changes.authenticated_userid = value.authenticated_userid;
    if (value.access_token !== undefined) changes.access_digest = tokenDigest(value.access_token);
    if (value.refresh_token !== undefined) changes.refresh_digest = tokenDigest(value.refresh_token);
    if (value.service !== undefined) changes.binding = referenceOf(value.service) ? `service:${referenceOf(value.service)}` : null;
    const updated = await this.deps.tokens.update(row, changes);
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
      return schemaViolation([{ path: [], message: 'at least one of these filters is required: credential, consumer, authenticated_userid' }]);
    }
    const matches = this.filter(req);
    if (!matches) return NOT_FOUND;
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
