/**
 * OpenMeter's consumer portal: tokens made, listed and invalidated through the v1 API (scope `manage`),
 * and the portal's one read, `GET api/v1/portal/meters/{slug}/query`, authenticated by the token itself
 * on a route of its own (`config.portal`): the token's subject's usage of the meters it allows.
 */
import { MAX_PORTAL_TOKEN_LIST, portalTokenExpired, validatePortalToken, type Billing, type PortalToken } from '../../billing/port.ts';
import { portalMeterForbidden, portalTokenRequired } from '../../shared/errors.ts';
import { readJson, validationProblem, type MeteringRequest } from '../http.ts';
import type { MeteringConfig } from '../../schema.ts';
import type { MeteringV1 } from './metering.ts';
import { operation, type V1Routes } from './router.ts';
import { fromV1, toV1 } from './shapes.ts';

function v1Token(t: PortalToken, token?: string): Record<string, unknown> {
  const { invalidated_at: _invalidated, ...rest } = t;
  return { ...toV1(rest), expired: portalTokenExpired(t), ...(token ? { token } : {}) };
}

const BEARER = /^Bearer ([A-Za-z0-9_-]{1,128})$/;

export class PortalV1 {
  constructor(
    private readonly billing: Billing,
    private readonly metering: MeteringV1,
  ) {}

  routes(): V1Routes {
    return {
      'v1/portal/tokens': { GET: operation('manage', (ctx) => this.list(ctx)), POST: operation('manage', (ctx, config) => this.create(ctx, config)) },
      'v1/portal/tokens/invalidate': { POST: operation('manage', (ctx, config) => this.invalidate(ctx, config)) },
      'v1/portal/meters/*/query': { GET: operation('portalToken', (ctx, config, [slug]) => this.query(ctx, config, slug)) },
    };
  }

  private async create(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const { definition, problems } = validatePortalToken(fromV1(await readJson(ctx, config.max_body_size)));
    if (!definition) throw validationProblem(problems);
    const { record, token } = await this.billing.portalTokens.create(definition);
    ctx.respond(200, v1Token(record, token));
  }

  private async list(ctx: MeteringRequest): Promise<void> {
    const raw = ctx.query.get('limit');
    const limit = raw === null ? 25 : Number(raw);
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PORTAL_TOKEN_LIST) {
      throw validationProblem([{ field: 'limit', reason: `must be an integer between 1 and ${MAX_PORTAL_TOKEN_LIST}`, rule: 'range', source: 'query' }]);
    }
    ctx.respond(200, (await this.billing.portalTokens.list(limit)).map((t) => v1Token(t)));
  }

  private async invalidate(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const body = (await readJson(ctx, config.max_body_size)) ?? {};
    const filter = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as { id?: unknown; subject?: unknown }) : undefined;
    if (!filter || (filter.id !== undefined && typeof filter.id !== 'string') || (filter.subject !== undefined && typeof filter.subject !== 'string')) {
      throw validationProblem([{ field: '', reason: 'the body is {id?, subject?}, both strings', rule: 'type', source: 'body' }]);
    }
    await this.billing.portalTokens.invalidate(filter as { id?: string; subject?: string });
    ctx.respond(204);
  }

  private async query(ctx: MeteringRequest, config: MeteringConfig, slug: string): Promise<void> {
    const header = ctx.headers.authorization;
    const match = typeof header === 'string' ? BEARER.exec(header) : null;
    const token = match ? await this.billing.portalTokens.authenticate(match[1]) : undefined;
    if (!token) throw portalTokenRequired();
    if (token.allowed_meter_slugs.length > 0 && !token.allowed_meter_slugs.includes(slug)) throw portalMeterForbidden(slug);
    await this.metering.portalQuery(ctx, config, slug, token.subject);
  }
}
