/**
 * Collectors under the metering route: `GET|POST /collectors`, `GET|DELETE /collectors/{name}`, and the
 * webhook endpoint `POST /collectors/{name}/events` of a collector without `match`.
 */
import { collectorExists, collectorHasMatch, collectorNotFound, declaredReadOnly, methodNotAllowed, RequestError, validationFailed } from '../shared/errors.ts';
import { collectorProblems, type CollectorDefinition, type CollectorRecord, type Collectors, type Ingestion } from '../ingest/port.ts';
import { readJson, requireScope, type MeteringRequest, type SubRoutes } from './http.ts';
import type { MeteringConfig } from '../schema.ts';

function publicCollector(record: CollectorRecord): Record<string, unknown> {
  const out: Record<string, unknown> = { name: record.name, mapping: record.mapping, origin: record.origin, created_at: record.created_at };
  if (record.description) out.description = record.description;
  if (record.match) out.match = record.match;
  return out;
}

export class CollectorsHttp implements SubRoutes {
  constructor(
    private readonly collectors: Collectors,
    private readonly ingestion: Ingestion,
  ) {}

  async route(ctx: MeteringRequest, config: MeteringConfig, parts: string[]): Promise<boolean> {
    if (parts[0] !== 'collectors' || parts.length > 3) return false;
    const method = ctx.method;
    const allow = (methods: string[]) => {
      if (!methods.includes(method)) throw methodNotAllowed(method, methods);
    };
    if (parts.length === 1) {
      allow(['GET', 'POST']);
      if (method === 'GET') {
        requireScope(ctx, config, 'read');
        ctx.respond(200, { data: this.collectors.list().map(publicCollector) });
      } else await this.create(ctx, config);
      return true;
    }
    const name = parts[1];
    if (parts.length === 3) {
      if (parts[2] !== 'events') return false;
      allow(['POST']);
      await this.webhook(ctx, config, name);
      return true;
    }
    allow(['GET', 'DELETE']);
    const found = this.collectors.get(name);
    if (!found) throw collectorNotFound(name);
    if (method === 'GET') {
      requireScope(ctx, config, 'read');
      ctx.respond(200, publicCollector(found.record));
      return true;
    }
    requireScope(ctx, config, 'manage');
    if (found.record.origin === 'config') throw declaredReadOnly('collector', name);
    await this.collectors.delete(name);
    ctx.respond(204);
    return true;
  }

  private async create(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    requireScope(ctx, config, 'manage');
    const body = await readJson(ctx, config.max_body_size);
    const problems = collectorProblems(body);
    if (problems.length > 0) {
      const described = problems.map((p) => (p.field ? `${p.field}: ${p.reason}` : p.reason));
      throw validationFailed(described, problems.map((p) => ({ ...p, rule: 'invalid', source: 'body' as const })));
    }
    const record = await this.collectors.create(body as CollectorDefinition);
    if (!record) throw collectorExists((body as CollectorDefinition).name);
    ctx.respond(201, publicCollector(record));
  }

  private async webhook(ctx: MeteringRequest, config: MeteringConfig, name: string): Promise<void> {
    requireScope(ctx, config, 'ingest');
    const collector = this.collectors.get(name);
    if (!collector) throw collectorNotFound(name);
    if (collector.record.match) throw collectorHasMatch(name);
    const body = await readJson(ctx, config.max_body_size);
    if (body === undefined) {
      throw new RequestError('METERING_ERR_MALFORMED_BODY', 'the body must be JSON', { invalidParameters: [{ field: 'body', reason: 'empty', rule: 'required', source: 'body' }] });
    }
    await this.ingestion.webhook(collector, body, config);
    ctx.respond(202);
  }
}
