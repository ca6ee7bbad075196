/**
 * OpenMeter v1's subjects: the subject keys events carry or customers claim, with the display name and
 * metadata an upsert recorded (billing's subject records). Listing and reading also show subjects that
 * only events or customers know, as OpenMeter's list of subjects seen in usage.
 */
import type { Billing } from '../../port.ts';
import { notFound, validationFailed } from '../../shared/errors.ts';
import { usageSubjects, validateSubjects, type SubjectRecord } from '../../customer/port.ts';
import type { MeteringService } from '../../../service.ts';
import { readJson, type MeteringRequest } from '../../../http/http.ts';
import type { MeteringConfig } from '../../../schema.ts';
import { operation, type V1Routes } from '../../../http/v1/router.ts';
import { byText, toV1 } from '../../../http/v1/shapes.ts';

/** A subject no upsert described: its key is its id. */
const bareSubject = (key: string) => ({ id: key, key, displayName: null, metadata: null });

const v1Subject = (r: SubjectRecord) => toV1(r);

/** v1's `displayName` (the subject's `metadata` keeps its name, unlike the `metadata` that v3 calls `labels`). */
function fromV1Subject(item: unknown): unknown {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) return item;
  const { displayName, ...rest } = item as Record<string, unknown>;
  return displayName === undefined ? rest : { ...rest, display_name: displayName };
}

function asList(body: unknown): unknown {
  return Array.isArray(body) ? body.map(fromV1Subject) : body;
}

export class SubjectsV1 {
  constructor(
    private readonly service: MeteringService,
    private readonly billing: Billing,
  ) {}

  routes(): V1Routes {
    return {
      'v1/subjects': { GET: operation('read', (ctx) => this.list(ctx)), POST: operation('manage', (ctx, config) => this.upsert(ctx, config)) },
      'v1/subjects/*': { GET: operation('read', (ctx, _config, [key]) => this.get(ctx, key)), DELETE: operation('manage', (ctx, _config, [key]) => this.delete(ctx, key)) },
    };
  }

  /** Every subject key known: recorded, in events, or a customer's usage subject. */
  private async known(): Promise<Set<string>> {
    const customers = (await this.billing.customers.list()).filter((c) => !c.deleted_at);
    return new Set([...(await this.service.subjects()), ...customers.flatMap(usageSubjects)]);
  }

  private async list(ctx: MeteringRequest): Promise<void> {
    const records = new Map((await this.billing.subjects.list()).map((r) => [r.key, v1Subject(r)]));
    for (const key of await this.known()) if (!records.has(key)) records.set(key, bareSubject(key));
    ctx.respond(200, [...records.values()].sort(byText((s) => s.key as string)));
  }

  private async upsert(ctx: MeteringRequest, config: MeteringConfig): Promise<void> {
    const { definitions, problems } = validateSubjects(asList(await readJson(ctx, config.max_body_size)));
    if (!definitions) throw validationFailed(problems);
    ctx.respond(200, (await this.billing.subjects.upsert(definitions)).map(v1Subject));
  }

  private async get(ctx: MeteringRequest, key: string): Promise<void> {
    const record = await this.billing.subjects.find(key);
    if (record) return void ctx.respond(200, v1Subject(record));
    if (!(await this.known()).has(key)) throw notFound('subject', key);
    ctx.respond(200, bareSubject(key));
  }

  private async delete(ctx: MeteringRequest, key: string): Promise<void> {
    await this.billing.subjects.delete(key);
    ctx.respond(204);
  }
}
