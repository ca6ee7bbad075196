/**
 * The meter catalogue: creating, changing and retiring meters, through the API or from gateway.yaml.
 * A change is made where the single writer is (it runs alone against event commits, and a new
 * aggregate generation backfills up to the last event committed): here when this process is alone on
 * its store, else handed to the aggregator (meter-commands.ts), which may be another process.
 */
import type { Logger } from 'pino';
import type { Store } from '../../../src/pdk/index.ts';
import { declaredReadOnly, LeaseLostError, meterExists, meterNotFound, ServiceError } from '../shared/errors.ts';
import { configMeterId, ulid } from '../shared/ids.ts';
import { meterKey } from '../shared/keys.ts';
import type { MeterCommand, MeterCommands, MeterReply } from './meter-commands.ts';
import { meterDefinitionFrom, sameAggregation, type MeterDefinition } from './meter-model.ts';
import type { MeterRecord, MeterRegistry } from './registry.ts';

/** Where meter changes are written: the single writer's side of this process (service.ts's aggregation). */
export interface MeterChangeSite {
  /** The store it writes (on a shared store: fenced by the aggregator's lease). */
  store: Store;
  writer: { readonly lastSeq: number; exclusive<T>(work: () => Promise<T>): Promise<T> };
  /** Starts the backfill of a new aggregate generation. */
  maintenance: { kick(): void };
}

/** What the catalogue asks of the service that composes it. */
export interface CatalogueHost {
  /** The change site of this process, or null where another process aggregates. */
  changeSite(): MeterChangeSite | null;
  /** Shared store: the meters as the store has them now. */
  refreshMeters(): Promise<void>;
}

/** Tells every process of the node that the meters changed (service.ts subscribes to it). */
export const METERS_TOPIC = 'metering-meters';

export class MeterCatalogue {
  constructor(
    private readonly meters: MeterRegistry,
    /** The process's own store (notices). */
    private readonly store: Store,
    /** Shared store only: where changes are handed to the aggregator. */
    private readonly commands: MeterCommands | null,
    private readonly host: CatalogueHost,
    private readonly log: Logger,
  ) {}

  async createMeter(def: MeterDefinition): Promise<MeterRecord> {
    return (await this.changeMeters({ op: 'create', def }))!;
  }

  async updateMeter(idOrKey: string, body: Record<string, any>): Promise<MeterRecord> {
    return (await this.changeMeters({ op: 'update', idOrKey, body }))!;
  }

  async deleteMeter(idOrKey: string): Promise<void> {
    await this.changeMeters({ op: 'delete', idOrKey });
  }

  find(idOrKey: string): MeterRecord {
    const record = this.meters.find(idOrKey);
    if (!record) throw meterNotFound(idOrKey);
    return record;
  }

  /**
   * Makes the stored meters match gateway.yaml's. On a shared store every process's configure asks,
   * so only a process that sees a difference hands the change to the aggregator (which may be down).
   */
  async syncDeclared(entities: Record<string, any>[]): Promise<void> {
    if (this.commands) {
      await this.host.refreshMeters();
      if (this.declaredChanges(entities, () => null, false).length === 0) return;
    }
    await this.changeMeters({ op: 'sync', entities });
  }

  /** The aggregator's side of a meter change handed over by any process; refusals are answers, other failures are retried. */
  async execute(command: MeterCommand): Promise<MeterReply> {
    try {
      return { record: await this.makeChange(command) };
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      return { error: { code: err.code, message: err.message } };
    }
  }

  /** A meter change: made here when this process is alone on its store, else by the aggregator (meter-commands.ts). */
  private async changeMeters(command: MeterCommand): Promise<MeterRecord | null> {
    if (!this.commands) return this.makeChange(command);
    const reply = await this.commands.send(command);
    if ('error' in reply) throw new ServiceError(reply.error.code, reply.error.message);
    // This process serves the change from now on.
    await this.host.refreshMeters();
    return reply.record;
  }

  private makeChange(command: MeterCommand): Promise<MeterRecord | null> {
    switch (command.op) {
      case 'create':
        return this.create(command.def);
      case 'update':
        return this.update(command.idOrKey, command.body);
      case 'delete':
        return this.delete(command.idOrKey).then(() => null);
      case 'sync':
        return this.syncDeclaredHere(command.entities).then(() => null);
    }
  }

  /** Meter changes are made only where the single writer is (on a shared store: by the aggregator). */
  private site(): MeterChangeSite {
    const site = this.host.changeSite();
    if (!site) throw new LeaseLostError();
    return site;
  }

  private create(def: MeterDefinition): Promise<MeterRecord> {
    return this.site().writer.exclusive(async () => {
      if (this.meters.liveByKey(def.key)) throw meterExists();
      const record = this.newRecord(def, ulid(), 'api');
      await this.save([record]);
      return record;
    });
  }

  /** Name, description, labels and dimensions; new dimensions rebuild the aggregates from stored events. */
  private update(idOrKey: string, body: Record<string, any>): Promise<MeterRecord> {
    return this.site().writer.exclusive(async () => {
      const current = this.mutable(idOrKey);
      const dimensions = body.dimensions ?? {};
      let next: MeterRecord = {
        ...current,
        name: body.name,
        description: 'description' in body ? body.description ?? null : current.description,
        labels: 'labels' in body ? body.labels ?? {} : current.labels,
        dimensions,
        updated_at: new Date().toISOString(),
      };
      if (!sameAggregation(current, next)) {
        next = { ...next, gen: current.gen + 1, backfill: this.backfillFromLastEvent(), retired: [...current.retired, current.gen] };
      }
      await this.save([next]);
      return next;
    });
  }

  private delete(idOrKey: string): Promise<void> {
    return this.site().writer.exclusive(async () => {
      const current = this.mutable(idOrKey);
      await this.save([this.retire(current)]);
    });
  }

  /** Makes the stored meters of gateway.yaml match the file (create, change, soft-delete). */
  private syncDeclaredHere(entities: Record<string, any>[]): Promise<void> {
    return this.site().writer.exclusive(() => this.save(this.declaredChanges(entities, () => this.backfillFromLastEvent(), true)));
  }

  private mutable(idOrKey: string): MeterRecord {
    const record = this.find(idOrKey);
    if (record.deleted_at) throw meterNotFound(idOrKey);
    if (record.origin === 'config') throw declaredReadOnly('meter', record.key);
    return record;
  }

  private newRecord(def: MeterDefinition, id: string, origin: MeterRecord['origin'], gen = 1, retired: number[] = [], backfill = this.backfillFromLastEvent()): MeterRecord {
    const now = new Date().toISOString();
    return {
      id,
      ...def,
      created_at: now,
      updated_at: now,
      deleted_at: null,
      origin,
      gen,
      backfill,
      retired,
    };
  }

  /** A new aggregate generation covers every event committed so far through the backfill. */
  private backfillFromLastEvent(): MeterRecord['backfill'] {
    const lastSeq = this.site().writer.lastSeq;
    return lastSeq > 0 ? { upTo: lastSeq, cursor: 0, aggregated: 0 } : null;
  }

  private retire(record: MeterRecord): MeterRecord {
    const now = new Date().toISOString();
    return { ...record, deleted_at: now, updated_at: now, backfill: null, retired: [...record.retired, record.gen] };
  }

  private async save(records: MeterRecord[]): Promise<void> {
    if (records.length === 0) return;
    const { store, maintenance } = this.site();
    await store.batch(records.map((r) => ({ type: 'put' as const, key: meterKey(r.id), value: JSON.stringify(r) })), { sync: true });
    for (const r of records) this.meters.set(r);
    maintenance.kick();
    // The change is answered once every process of this node serves it (a shared store's processes read the meters from it).
    if (this.commands) await this.store.notices.publishAndWait(METERS_TOPIC, '');
  }

  /**
   * The meter records that make the stored meters match gateway.yaml's (create, change, soft-delete).
   * `backfill`: where a new aggregate generation starts (only the writer knows; a mere check passes any).
   */
  private declaredChanges(entities: Record<string, any>[], backfill: () => MeterRecord['backfill'], report: boolean): MeterRecord[] {
    const changes: MeterRecord[] = [];
    const declared = new Set<string>();
    for (const entity of entities) {
      const def = meterDefinitionFrom(entity);
      const id = configMeterId(def.key);
      const clash = this.meters.liveByKey(def.key);
      if (clash && clash.id !== id) {
        if (report) this.log.error({ meter: def.key }, 'metering: a meter created through the API already uses this key; the gateway.yaml meter is ignored');
        continue;
      }
      declared.add(id);
      const current = this.meters.get(id);
      if (!current) changes.push(this.newRecord(def, id, 'config', 1, [], backfill()));
      else if (current.deleted_at) changes.push({ ...this.newRecord(def, id, 'config', current.gen + 1, current.retired, backfill()), created_at: current.created_at });
      else if (!sameAggregation(current, def)) {
        changes.push({
          ...current,
          ...def,
          updated_at: new Date().toISOString(),
          gen: current.gen + 1,
          backfill: backfill(),
          retired: [...current.retired, current.gen],
        });
      } else if (current.name !== def.name || current.description !== def.description || JSON.stringify(current.labels) !== JSON.stringify(def.labels)) {
        changes.push({ ...current, name: def.name, description: def.description, labels: def.labels, updated_at: new Date().toISOString() });
      }
    }
    for (const record of this.meters.live()) {
      if (record.origin === 'config' && !declared.has(record.id)) changes.push(this.retire(record));
    }
    return changes;
  }
}
