/**
 * The metering service: one per gateway process, shared by every metering route. Owns the writer
 * (group commit), the meter registry, the query engine and the background work, and implements
 * the operations the HTTP layer exposes.
 */
import type { Logger } from 'pino';
import { registerStoreProcedures, type ConfigView, type Journal, type PluginApi, type Store } from '../../src/pdk/index.ts';
import { AGGREGATOR_STATUS_KEY, SUBJECT_PREFIX, SUBJECTS_INDEXED_KEY, meterKey, escapePart, subjectKey, unescapePart } from './keys.ts';
import { AggregateLedger } from './ledger.ts';
import { Maintenance } from './maintenance.ts';
import { meterDefinitionFrom, sameAggregation, type MeterDefinition } from './meter-model.ts';
import { configMeterId, ulid } from './ids.ts';
import { meteringProcedures, type QueryResult } from './query.ts';
import type { MeterQuery } from './query-request.ts';
import { MeterRegistry, type MeterRecord } from './registry.ts';
import type { MeteringConfig } from './schema.ts';
import { prepareEvents, type PreparedEvent, type StoredEvent } from './events.ts';
import { formatUtc } from './time.ts';
import { eventProblem } from './values.ts';
import { Writer, type CommittedListener, type WriterOptions } from './writer.ts';
import { BodyError, LeaseLostError, ServiceError } from './errors.ts';
import { Aggregator, awaitDrained, drainInboxRound, ProcessInbox, processOf, type AggregatorStatus, type Term } from './aggregator.ts';
import { MeterCommands, MeterCommandTimeout, type MeterCommand, type MeterReply } from './meter-commands.ts';
import { awaitFolded, JournalDrain, JournalInbox, prepareJournal } from './journal-inbox.ts';
import { JournaledEvents, KeyedEvents, type StoredEvents } from './stored-events.ts';

export interface EventFilters {
  subject?: string;
  type?: string;
  source?: string;
  id?: string;
  from?: number;
  to?: number;
}

export interface EventPage {
  items: Record<string, unknown>[];
  next: string | null;
}

const DEFAULTS = { batchMaxEvents: 5_000, batchMaxWaitMs: 1, retentionDays: 730, queueMaxEvents: 100_000 };

/**
 * What the metering plugin offers plugins of the same process that produce events themselves (the
 * plugin service `metering.ingest`; request metering uses it): no HTTP, no token, no JSON round trip.
 */
export interface LocalIngest {
  /**
   * Validates each event alone, as `POST /events` would, and commits the valid ones in the writer's
   * group commit; resolves once they are durable (or were duplicates). An invalid event is refused
   * alone, with the reason. Rejects with QueueFullError or AggregationLagError (retry later), or
   * WriterClosedError.
   */
  ingest(events: readonly unknown[]): Promise<RefusedEvent[]>;
}

export interface RefusedEvent {
  index: number;
  reason: string;
}

export interface ServiceOptions {
  purgeIntervalMs?: number;
  backfillChunk?: number;
  dedupeFilterCapacity?: number;
}

/** The single writer and what works beside it on the aggregates: one per process alone on its store, one per aggregator term on a shared one. */
interface Aggregation {
  /** The store it writes (on a shared store: fenced by the aggregator's lease). */
  store: Store;
  writer: Writer;
  ledger: AggregateLedger;
  maintenance: Maintenance;
}

const REFRESH_METERS_EVERY_MS = 1_000;
const METERS_TOPIC = 'metering-meters';

export class MeteringService {
  readonly meters = new MeterRegistry();
  /** Where ingest puts events: the single writer, or on a shared store this process's inbox. */
  readonly writer: Writer;
  /** Called with each batch of events committed by this process's single writer (never on other processes). */
  readonly committedListeners = new Set<CommittedListener>();
  private readonly store: Store;
  /** The store's journal, where a shared store has one (PostgreSQL): events go there, one row each (journal-inbox.ts). */
  private readonly journal: Journal | null;
  private readonly events: StoredEvents;
  /** The current term's rounds over the journal (journal only). */
  private journalDrain: JournalDrain | null = null;
  private readonly log: Logger;
  /** Events waiting for their commit beyond which local producers are refused (the largest of the routes' `queue_max_events`). */
  private localQueueLimit = DEFAULTS.queueMaxEvents;
  /** Events older than this many days are refused and purged (the longest retention of any metering instance). */
  private retentionDays = DEFAULTS.retentionDays;
  /** Alone on the store: the aggregation, for good. Shared: the current term's while this process aggregates. */
  private local: Aggregation | null = null;
  private readonly processId: string;
  /** Shared store only. */
  private readonly aggregator: Aggregator | null = null;
  /** Set once this process takes part in the aggregator's election (see joinElection). */
  private electionJoined: Promise<void> | null = null;
  private readonly commands: MeterCommands | null = null;
  private meterRefresh: NodeJS.Timeout | undefined;
  private unsubscribeMeters: () => void = () => undefined;
  /** The registry reload in flight, and whether another must follow it (a read asked after it started). */
  private reloading: Promise<void> | null = null;
  private reloadAgain: Promise<void> | null = null;

  constructor(
    api: Pick<PluginApi, 'store' | 'log'> & Partial<Pick<PluginApi, 'sharedStore' | 'nodeId'>>,
    private readonly options: ServiceOptions = {},
  ) {
    this.store = api.store;
    this.log = api.log;
    // Wherever a service runs, so do its procedures (a gateway registers them too, and a node's primary).
    registerStoreProcedures([{ name: 'metering', storeProcedures: meteringProcedures }]);
    this.journal = api.sharedStore ? this.store.journal() : null;
    this.events = this.journal ? new JournaledEvents(this.journal) : new KeyedEvents(this.store);
    // Names this process in the inboxes, meter commands and the aggregator's lease and status.
    this.processId = `${api.nodeId ?? 'node'}.${process.pid}.${ulid()}`;
    if (!api.sharedStore) {
      this.local = this.aggregation(this.store);
      this.writer = this.local.writer;
      return;
    }
    const processId = this.processId;
    const inbox = this.journal ? new JournalInbox(this.store, this.journal) : new ProcessInbox(this.store, processId);
    this.writer = new Writer(this.store, new AggregateLedger(this.store), this.meters, this.log, this.writerOptions(), { inbox });
    this.commands = new MeterCommands(this.store, processId, this.log);
    this.aggregator = new Aggregator(this.store, processId, (fenced) => this.startTerm(fenced), this.log, (writer) => this.drainRound(writer));
  }

  /** The aggregator's round: over the journal, or every process's inbox. */
  private drainRound(writer: Writer): Promise<number> {
    const batchEvents = this.writer.options.batchMaxEvents;
    return this.journalDrain ? this.journalDrain.round(writer, batchEvents) : drainInboxRound(this.store, writer, batchEvents);
  }

  private writerOptions(): WriterOptions {
    return this.writer?.options ?? { batchMaxEvents: DEFAULTS.batchMaxEvents, batchMaxWaitMs: DEFAULTS.batchMaxWaitMs };
  }

  private aggregation(store: Store): Aggregation {
    const ledger = new AggregateLedger(store);
    const setup = { dedupeFilterCapacity: this.options.dedupeFilterCapacity, committedListeners: this.committedListeners, journaled: this.journal !== null };
    const writer = new Writer(store, ledger, this.meters, this.log, this.writerOptions(), setup);
    // Keyed events are purged through the term's store: fenced like its other writes.
    const events = this.journal ? this.events : new KeyedEvents(store);
    const maintenance = new Maintenance(store, events, writer, ledger, this.meters, this.log, {
      backfillChunk: this.options.backfillChunk ?? 5_000,
      deleteChunk: 5_000,
      purgeIntervalMs: this.options.purgeIntervalMs ?? 60_000,
    });
    maintenance.retentionDays = this.retentionDays;
    return { store, writer, ledger, maintenance };
  }

  /** The writer of every event, when this process is alone on its store (no other process commits events). */
  get soleWriter(): Writer | null {
    return this.aggregator ? null : this.local!.writer;
  }

  /** The single writer of this process, when it has one now (alone on its store, or aggregating a shared one). */
  get aggregatingWriter(): Writer | null {
    return this.local?.writer ?? null;
  }

  /** The dedupe filter of this process's single writer (none on a shared store's other processes: their metrics sum to the aggregator's). */
  get dedupeFilterSize(): { hashes: number; bytes: number } {
    return this.aggregatingWriter?.dedupeFilter.size ?? { hashes: 0, bytes: 0 };
  }

  /**
   * Which process aggregates (null: none yet) and its dedupe filter: this process's, or on a shared store
   * the aggregator's as it reported after the round that drained what was acknowledged before this call.
   */
  async aggregatorStatus(): Promise<AggregatorStatus | { aggregator: null; dedupe_filter: { hashes: number; bytes: number } }> {
    if (this.aggregatingWriter || !this.aggregator) return { aggregator: processOf(this.processId), dedupe_filter: this.dedupeFilterSize };
    await this.caughtUp();
    const reported = await this.store.get(AGGREGATOR_STATUS_KEY);
    return reported === undefined ? { aggregator: null, dedupe_filter: { hashes: 0, bytes: 0 } } : (JSON.parse(reported) as AggregatorStatus);
  }

  async open(): Promise<void> {
    if (this.journal) await prepareJournal(this.store, this.journal);
    await this.meters.load(this.store);
    if (this.local) {
      await this.local.writer.open();
      await this.drainLeftInbox(this.local.writer);
      this.local.maintenance.start();
      const pending = this.meters.pendingBackfills();
      if (pending.length) this.log.info({ meters: pending.map((m) => m.key) }, 'metering: resuming backfills');
    } else {
      this.unsubscribeMeters = this.store.notices.subscribe(METERS_TOPIC, () => this.refreshMeters().catch(() => undefined));
      this.meterRefresh = setInterval(() => void this.refreshMeters().catch((err) => this.log.warn({ err }, 'metering: reloading meters failed')), REFRESH_METERS_EVERY_MS);
      this.meterRefresh.unref();
    }
    this.subjectsIndexed = this.indexStoredSubjects().catch((err) => this.log.error({ err }, 'metering: indexing the subjects of stored events failed'));
  }

  /**
   * Events an earlier run on this store with several processes acknowledged into an inbox and did not
   * aggregate before it stopped (worker_processes turned down to 1): counted before anything else.
   */
  private async drainLeftInbox(writer: Writer): Promise<void> {
    let drained = 0;
    for (let round; (round = await drainInboxRound(this.store, writer, writer.options.batchMaxEvents)) > 0; ) drained += round;
    if (drained > 0) this.log.info({ entries: drained }, 'metering: aggregated the inbox entries an earlier run with several processes left');
  }

  /**
   * Shared store: this process took the aggregator's lease. Everything the single writer keeps in
   * memory is rebuilt from the store, on the fenced view of it (aggregator.ts lists that state).
   */
  private async startTerm(fenced: Store): Promise<Term> {
    const term = this.aggregation(fenced);
    this.local = term;
    if (this.journal) this.journalDrain = new JournalDrain(fenced, this.journal);
    let stopServing: () => Promise<void> = async () => undefined;
    try {
      await this.meters.load(fenced);
      await term.writer.open();
      term.maintenance.start();
      stopServing = this.commands!.serve(fenced, (command) => this.execute(command));
    } catch (err) {
      this.local = null;
      await term.maintenance.stop();
      await term.writer.close();
      throw err;
    }
    return {
      writer: term.writer,
      end: async () => {
        await stopServing();
        await term.maintenance.stop();
        await term.writer.close();
        if (this.local === term) this.local = null;
      },
    };
  }

  /**
   * Shared store: the meters as the store has them now (what the aggregator committed). The
   * aggregator's own registry is the truth and is never overwritten from the store. A call made while
   * a reload is in flight waits for the next one, which starts after the call.
   */
  refreshMeters(): Promise<void> {
    if (!this.aggregator) return Promise.resolve();
    if (!this.reloading) {
      this.reloading = this.reloadMeters().finally(() => (this.reloading = null));
      return this.reloading;
    }
    this.reloadAgain ??= this.reloading.catch(() => undefined).then(() => {
      this.reloadAgain = null;
      return this.refreshMeters();
    });
    return this.reloadAgain;
  }

  private async reloadMeters(): Promise<void> {
    if (this.local) return;
    const records = await MeterRegistry.read(this.store);
    if (!this.local) this.meters.replace(records);
  }

  /** Read-your-writes on a shared store: every event acknowledged before this call is aggregated after it. */
  async caughtUp(waitMs?: number): Promise<void> {
    if (!this.aggregator) return;
    await (this.journal ? awaitFolded(this.store, this.journal, waitMs) : awaitDrained(this.store, waitMs));
  }

  /** Resolves once the subjects of events stored before the subject index existed are in it. */
  private subjectsIndexed: Promise<void> = Promise.resolve();

  /** Once per store: the subjects of every stored event (the writer indexes new ones itself). */
  private async indexStoredSubjects(): Promise<void> {
    if ((await this.store.get(SUBJECTS_INDEXED_KEY)) !== undefined) return;
    const seen = new Set<string>();
    for await (const [, value] of this.store.scan({ prefix: 'e/' })) {
      const subject = (JSON.parse(value) as StoredEvent).subject;
      if (seen.has(subject)) continue;
      seen.add(subject);
      await this.store.put(subjectKey(subject), '');
    }
    await this.store.put(SUBJECTS_INDEXED_KEY, '1');
  }

  /** Every subject a stored event names (OpenMeter's v1 subject list), in key order. */
  async subjects(): Promise<string[]> {
    await this.caughtUp();
    await this.subjectsIndexed;
    const out: string[] = [];
    for await (const [key] of this.store.scan({ prefix: SUBJECT_PREFIX })) out.push(unescapePart(key.slice(SUBJECT_PREFIX.length)));
    return out;
  }

  async close(): Promise<void> {
    await this.subjectsIndexed;
    await this.writer.close();
    clearInterval(this.meterRefresh);
    this.unsubscribeMeters();
    await this.aggregator?.stop();
    await this.reloading?.catch(() => undefined);
    if (this.local) {
      await this.local.maintenance.stop();
      await this.local.writer.idle();
    }
  }

  /** Applies the settings of every metering instance and the meters of gateway.yaml. */
  async configure(view: ConfigView<MeteringConfig>): Promise<void> {
    const configs = view.instances.map((i) => i.config);
    if (configs.length > 0 || view.entities('meters').length > 0) await this.joinElection();
    this.writer.options = {
      batchMaxEvents: configs.length ? Math.max(...configs.map((c) => c.batch_max_events)) : DEFAULTS.batchMaxEvents,
      batchMaxWaitMs: configs.length ? Math.min(...configs.map((c) => c.batch_max_wait_ms)) : DEFAULTS.batchMaxWaitMs,
    };
    this.localQueueLimit = configs.length ? Math.max(...configs.map((c) => c.queue_max_events)) : DEFAULTS.queueMaxEvents;
    // Purge only what no route still promises to keep.
    this.retentionDays = configs.length ? Math.max(...configs.map((c) => c.retention_days)) : DEFAULTS.retentionDays;
    if (this.local) {
      this.local.writer.options = this.writer.options;
      this.local.maintenance.retentionDays = this.retentionDays;
    }
    await this.syncDeclaredMeters(view.entities('meters'));
  }

  // ---- events ----

  ingest(events: PreparedEvent[], config: MeteringConfig): Promise<void> {
    return this.writer.submit(events, config.queue_max_events);
  }

  /**
   * Shared store: takes part in the election of the aggregator once metering is used here (a metering
   * route, a declared meter, events from another plugin), not before: a node that meters nothing runs no
   * election and takes no lease.
   */
  private joinElection(): Promise<void> {
    if (!this.aggregator) return Promise.resolve();
    return (this.electionJoined ??= this.aggregator.start());
  }

  /** LocalIngest: events produced in this process, each validated alone. */
  ingestLocal(events: readonly unknown[]): Promise<RefusedEvent[]> {
    void this.joinElection();
    const now = Date.now();
    const retentionDays = this.retentionDays;
    const context = { now, retentionStart: Math.floor(now / 1000) - retentionDays * 86_400, retentionDays, metersOf: (type: string) => this.meters.aggregating(type) };
    let prepared: PreparedEvent[] = [];
    const refused: RefusedEvent[] = [];
    try {
      prepared = prepareEvents(events as unknown[], true, context);
    } catch (err) {
      if (!(err instanceof BodyError)) throw err;
      // Some are invalid: each is taken or refused alone.
      events.forEach((event, index) => {
        try {
          prepared.push(...prepareEvents([event], false, context));
        } catch (err) {
          if (!(err instanceof BodyError)) throw err;
          refused.push({ index, reason: err.message });
        }
      });
    }
    if (prepared.length === 0) return Promise.resolve(refused);
    return this.writer.submit(prepared, this.localQueueLimit).then(() => refused);
  }

  /** Stored events, newest event time first, `after` = cursor of the previous page. */
  async listEvents(filters: EventFilters, size: number, after?: string): Promise<EventPage> {
    await this.caughtUp();
    const range = {
      from: Math.max(filters.from ?? 0, this.retentionStart()),
      to: filters.to,
      typeEscaped: filters.type === undefined ? undefined : escapePart(filters.type),
    };
    const items: Record<string, unknown>[] = [];
    for await (const row of this.events.newestFirst(range, after)) {
      const event = JSON.parse(row.json) as StoredEvent;
      if (filters.subject !== undefined && event.subject !== filters.subject) continue;
      if (filters.source !== undefined && event.source !== filters.source) continue;
      if (filters.id !== undefined && event.id !== filters.id) continue;
      items.push(this.listedEvent(event, row.storedAt));
      if (items.length >= size) return { items, next: row.cursor };
    }
    return { items, next: null };
  }

  private listedEvent(event: StoredEvent, storedAt: number): Record<string, unknown> {
    const ce: Record<string, unknown> = {
      specversion: '1.0',
      id: event.id,
      source: event.source,
      type: event.type,
      subject: event.subject,
      time: formatUtc(event.time),
    };
    if (event.datacontenttype) ce.datacontenttype = event.datacontenttype;
    if (event.dataschema) ce.dataschema = event.dataschema;
    if (event.data !== undefined) ce.data = event.data;
    return {
      event: ce,
      ingested_at: new Date(event.ingested_at).toISOString(),
      stored_at: new Date(storedAt).toISOString(),
      validation_errors: this.validationErrors(event),
    };
  }

  private validationErrors(event: StoredEvent): { code: string; message: string }[] {
    // One error per matching meter that cannot use the event (none when no meter matches), as OpenMeter lists them.
    const errors: { code: string; message: string }[] = [];
    for (const m of this.meters.live()) {
      const problem = m.event_type === event.type ? eventProblem(m, event.data) : undefined;
      if (problem) errors.push({ code: 'validation_error', message: problem });
    }
    return errors;
  }

  // ---- meters ----

  private newRecord(def: MeterDefinition, id: string, origin: MeterRecord['origin'], gen = 1, retired: number[] = [], backfill = this.backfillFromHere()): MeterRecord {
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

  /** The aggregation of this process; meter changes are made only where it is (on a shared store: by the aggregator). */
  private here(): Aggregation {
    if (!this.local) throw new LeaseLostError();
    return this.local;
  }

  /** A new aggregate generation covers every event committed so far through the backfill. */
  private backfillFromHere(): MeterRecord['backfill'] {
    const lastSeq = this.here().writer.lastSeq;
    return lastSeq > 0 ? { upTo: lastSeq, cursor: 0, aggregated: 0 } : null;
  }

  private async save(records: MeterRecord[]): Promise<void> {
    if (records.length === 0) return;
    const { store, maintenance } = this.here();
    await store.batch(records.map((r) => ({ type: 'put' as const, key: meterKey(r.id), value: JSON.stringify(r) })), { sync: true });
    for (const r of records) this.meters.set(r);
    maintenance.kick();
    // The change is answered once every process of this node serves it.
    if (this.aggregator) await this.store.notices.publishAndWait(METERS_TOPIC, '');
  }

  /**
   * Makes the stored meters match gateway.yaml's. On a shared store every process's configure asks,
   * so only a process that sees a difference hands the change to the aggregator (which may be down).
   */
  private async syncDeclaredMeters(entities: Record<string, any>[]): Promise<void> {
    if (this.commands) {
      await this.refreshMeters();
      if (this.declaredChanges(entities, () => null, false).length === 0) return;
    }
    await this.changeMeters({ op: 'sync', entities });
  }

  /** A meter change: made here when this process is alone on its store, else by the aggregator (meter-commands.ts). */
  private async changeMeters(command: MeterCommand): Promise<MeterRecord | null> {
    if (!this.commands) return this.makeChange(command);
    let reply: MeterReply;
    try {
      reply = await this.commands.send(command);
    } catch (err) {
      if (err instanceof MeterCommandTimeout) throw new ServiceError(503, err.message, { 'retry-after': '5' });
      throw err;
    }
    if ('error' in reply) throw new ServiceError(reply.error.status, reply.error.message, reply.error.headers);
    // This process serves the change from now on.
    await this.refreshMeters();
    return reply.record;
  }

  private makeChange(command: MeterCommand): Promise<MeterRecord | null> {
    switch (command.op) {
      case 'create':
        return this.createMeterHere(command.def);
      case 'update':
        return this.updateMeterHere(command.idOrKey, command.body);
      case 'delete':
        return this.deleteMeterHere(command.idOrKey).then(() => null);
      case 'sync':
        return this.syncDeclaredMetersHere(command.entities).then(() => null);
    }
  }

  /** The aggregator's side of a meter change handed over by any process; refusals are answers, other failures are retried. */
  private async execute(command: MeterCommand): Promise<MeterReply> {
    try {
      return { record: await this.makeChange(command) };
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      return { error: { status: err.status, message: err.message, headers: err.headers } };
    }
  }

  async createMeter(def: MeterDefinition): Promise<MeterRecord> {
    return (await this.changeMeters({ op: 'create', def }))!;
  }

  async updateMeter(idOrKey: string, body: Record<string, any>): Promise<MeterRecord> {
    return (await this.changeMeters({ op: 'update', idOrKey, body }))!;
  }

  async deleteMeter(idOrKey: string): Promise<void> {
    await this.changeMeters({ op: 'delete', idOrKey });
  }

  private createMeterHere(def: MeterDefinition): Promise<MeterRecord> {
    return this.here().writer.exclusive(async () => {
      if (this.meters.liveByKey(def.key)) throw new ServiceError(409, 'conflict error: meter with the same slug already exists');
      const record = this.newRecord(def, ulid(), 'api');
      await this.save([record]);
      return record;
    });
  }

  find(idOrKey: string): MeterRecord {
    const record = this.meters.find(idOrKey);
    if (!record) throw new ServiceError(404, `not found error: meter not found: ${idOrKey}`);
    return record;
  }

  private mutable(idOrKey: string): MeterRecord {
    const record = this.find(idOrKey);
    if (record.deleted_at) throw new ServiceError(404, `not found error: meter not found: ${idOrKey}`);
    if (record.origin === 'config') {
      throw new ServiceError(405, `meter ${record.key} is declared in gateway.yaml and is read-only; change it there`);
    }
    return record;
  }

  /** Name, description, labels and dimensions; new dimensions rebuild the aggregates from stored events. */
  private updateMeterHere(idOrKey: string, body: Record<string, any>): Promise<MeterRecord> {
    return this.here().writer.exclusive(async () => {
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
        next = { ...next, gen: current.gen + 1, backfill: this.backfillFromHere(), retired: [...current.retired, current.gen] };
      }
      await this.save([next]);
      return next;
    });
  }

  private deleteMeterHere(idOrKey: string): Promise<void> {
    return this.here().writer.exclusive(async () => {
      const current = this.mutable(idOrKey);
      await this.save([this.retire(current)]);
    });
  }

  private retire(record: MeterRecord): MeterRecord {
    const now = new Date().toISOString();
    return { ...record, deleted_at: now, updated_at: now, backfill: null, retired: [...record.retired, record.gen] };
  }

  /** Makes the stored meters of gateway.yaml match the file (create, change, soft-delete). */
  private syncDeclaredMetersHere(entities: Record<string, any>[]): Promise<void> {
    return this.here().writer.exclusive(() => this.save(this.declaredChanges(entities, () => this.backfillFromHere(), true)));
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
        changes.push({ ...current, ...def, updated_at: new Date().toISOString(), gen: current.gen + 1, backfill: backfill(), retired: [...current.retired, current.gen] });
      } else if (current.name !== def.name || current.description !== def.description || JSON.stringify(current.labels) !== JSON.stringify(def.labels)) {
        changes.push({ ...current, name: def.name, description: def.description, labels: def.labels, updated_at: new Date().toISOString() });
      }
    }
    for (const record of this.meters.live()) {
      if (record.origin === 'config' && !declared.has(record.id)) changes.push(this.retire(record));
    }
    return changes;
  }

  // ---- queries ----

  async query(record: MeterRecord, query: MeterQuery, waitMs: number): Promise<QueryResult> {
    await this.caughtUp();
    if (!(await this.meters.whenReady(record.id, waitMs))) {
      const progress = this.meters.get(record.id)?.backfill;
      const percent = progress && progress.upTo > 0 ? Math.floor((progress.cursor / progress.upTo) * 100) : 0;
      throw new ServiceError(503, `meter ${record.key} is still aggregating stored events (${percent}%); retry later`, { 'retry-after': '5' });
    }
    const current = this.meters.get(record.id)!;
    // Where the aggregates are (queryNearData): on a node of workers, in the primary.
    return (await this.store.nearData('metering.query', [current, query, this.retentionStart()])) as QueryResult;
  }

  /**
   * Oldest event time inside the retention period, seconds. Reads stop there at once: the purge runs
   * on a schedule, and a roll-up bucket is only dropped once all of it has expired.
   */
  private retentionStart(): number {
    return Math.floor(Date.now() / 1000) - this.retentionDays * 86_400;
  }
}
