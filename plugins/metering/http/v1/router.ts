/**
 * OpenMeter's classic API under the metering route (`api/v1/...` and the `api/v2/...` entitlement
 * paths), so that the official `@openmeter/sdk` works with the route's URL as its base URL. Each area
 * (one file each) is a table of paths to handlers that translate v1 requests into calls of the same
 * domain services the v3 paths use, and their answers back: one domain, two HTTP shapes.
 */
import { methodNotAllowed, noResource } from '../../shared/errors.ts';
import { requireScope, type MeteringRequest, type Operation, type SubRoutes } from '../http.ts';
import type { MeteringConfig } from '../../schema.ts';
import { sendV1Problem } from './problems.ts';

/** `params`: the path segments the pattern's `*` matched, in order. */
export type V1Handler = (ctx: MeteringRequest, config: MeteringConfig, params: string[]) => Promise<void> | void;
export interface V1Operation {
  /** `portalToken`: the handler authenticates a consumer portal token itself; served only on portal routes. */
  scope: Operation | 'portalToken';
  handle: V1Handler;
}
/** Paths under `api/` (`v1/customers/*`, `*` one segment) and the operation of each method. */
export type V1Routes = Record<string, Partial<Record<string, V1Operation>>>;

export const operation = (scope: V1Operation['scope'], handle: V1Handler): V1Operation => ({ scope, handle });

interface CompiledRoute {
  segments: string[];
  /** Literal segments first: `portal/tokens/invalidate` wins over `portal/tokens/*`. */
  wildcards: number;
  methods: Partial<Record<string, V1Operation>>;
}

export class OpenMeterV1Http implements SubRoutes {
  private readonly routes: CompiledRoute[];

  /** `areas`: the route tables of each area; a new area is one more table. */
  constructor(areas: V1Routes[]) {
    this.routes = areas
      .flatMap((table) => Object.entries(table))
      .map(([pattern, methods]) => ({ segments: pattern.split('/'), wildcards: pattern.split('/').filter((s) => s === '*').length, methods }))
      .sort((a, b) => a.wildcards - b.wildcards);
  }

  async route(ctx: MeteringRequest, config: MeteringConfig, parts: string[]): Promise<boolean> {
    if (parts[0] !== 'api' || (parts[1] !== 'v1' && parts[1] !== 'v2')) return false;
    const path = parts.slice(1);
    try {
      const match = this.routes.find((r) => r.segments.length === path.length && r.segments.every((s, i) => s === '*' || s === path[i]));
      if (!match) throw noResource('OpenMeter v1', ctx.path);
      const op = match.methods[ctx.method];
      if (!op) throw methodNotAllowed(ctx.method, Object.keys(match.methods));
      // A portal route (config.portal) serves the portal's read alone, and only there is it served.
      if (config.portal !== (op.scope === 'portalToken')) throw noResource('OpenMeter v1', ctx.path);
      if (op.scope !== 'portalToken') requireScope(ctx, config, op.scope);
      await op.handle(ctx, config, path.filter((_, i) => match.segments[i] === '*'));
    } catch (err) {
      sendV1Problem(ctx, err);
    }
    return true;
  }
}
