/**
 * The metering service: one per gateway process, shared by every metering route. Composes the writer
 * (group commit), the meter registry and catalogue, the event listing, the query engine and the
 * background work; leads the aggregation on a shared store and keeps this process's meters fresh.
 */
import type { Logger } from 'pino';
import { registerStoreProcedures, type ConfigView, type Journal, type PluginApi, type ProcedureHost, type Store, type StoreProcedure } from '../../src/pdk/index.ts';
import { AGGREGATOR_STATUS_KEY, SUBJECT_PREFIX, SUBJECTS_INDEXED_KEY, subjectKey, unescapePart } from './shared/keys.ts';
import { AggregateLedger, Aggregator, Maintenance, processOf, writerAggregates, type AggregatorStatus, type Term } from './aggregation/port.ts';
import { MeterCatalogue, MeterCommands, MeterRegistry, METERS_TOPIC, type MeterRecord } from './meter/port.ts';
import { ulid } from './shared/ids.ts';
import { EventListing, meteringProcedures, type MeterQuery, type QueryResult, type UsageService } from './query/port.ts';
import type { MeteringConfig } from './schema.ts';
import { prepareEvents, type EventSink } from './ingest/port.ts';
import type { PreparedEvent, StoredEvent } from './shared/events.ts';
import { Writer, type CommittedListener, type Inbox, type WriterOptions } from './storage/writer.ts';
import { BodyError, LeaseLostError, meterBackfilling } from './shared/errors.ts';
import { HAND_OFF_PROCEDURE, PrimaryHandOff } from './storage/hand-off.ts';
import { awaitDrained, drainInboxRound, eventsOf, ProcessInbox } from './storage/inbox.ts';
import { awaitFolded, JournalDrain, JournalInbox, prepareJournal } from './storage/journal-inbox.ts';
import { JournaledEvents, KeyedEvents, type StoredEvents } from './storage/stored-events.ts';

const DEFAULTS = { batchMaxEvents: 5_000, batchMaxWaitMs: 1, retentionDays: 730, queueMaxEvents: 100_000 };

/**
 * What the metering plugin offers plugins of the same process that produce events themselves (the
 * plugin service `metering.ingest`; request metering uses it): no HTTP, no token, no JSON round trip.
 */
export interface LocalIngest {
  /**
   * Validates each event alone, as `POST /events` would, and commits the valid ones in the writer's
   * group commit; resolves once they are durable (or were duplicates). An invalid event is refused
   * alone, with the reason. Rejects with QueueFullError or AggregationLagError (retry later; other
   * plugins compare their codes, exported by public.ts), or WriterClosedError.
   */
  ingest(events: readonly unknown[]): Promise<RefusedEvent[]>;
}

export interface RefusedEvent {
  index: number;
  reason: string;
  /** The catalogue code of the refusal (METERING_ERR_INVALID_EVENT, …). */
  code: string;
}

export interface ServiceOptions {
  /**
   * Set in the primary of a LevelDB node of workers: this service runs the node's single writer for the
   * workers' hand-offs (storage/hand-off.ts) and is the only one to take part in the election.
   */
  primary?: boolean;
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

/** What a worker's configuration sets for the node's single writer in its primary. */
interface AggregationSettings {
  writer: WriterOptions;
  retentionDays: number;
}

/** The store procedure that starts the primary's single writer, or gives it a worker's settings. */
const AGGREGATE_PROCEDURE = 'metering.aggregate';
/** The store procedure that tells a worker the primary's aggregator status. */
const STATUS_PROCEDURE = 'metering.status';

type NoAggregator = { aggregator: null; dedupe_filter: { hashes: number; bytes: number } };
const NO_AGGREGATOR: NoAggregator = { aggregator: null, dedupe_filter: { hashes: 0, bytes: 0 } };

/** One per process: what ingestion commits to (EventSink) and billing's usage reads (UsageService). */
export class MeteringService implements EventSink, UsageService {
  readonly meters = new MeterRegistry();
  /** Creating, changing and retiring meters (made by the aggregator on a shared store). */
  readonly catalogue: MeterCatalogue;
  readonly eventListing: EventListing;
  /** Where ingest puts events: the single writer, or on a shared store this process's inbox. */
  readonly writer: Writer;
  /** Called with each batch of events committed by this process's single writer (never on other processes). */
  readonly committedListeners = new Set<CommittedListener>();
  private readonly store: Store;
  /** The store's journal, where a shared store has one (PostgreSQL): events go there, one row each (storage/journal-inbox.ts). */
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
  /** Whether other processes write this store too (workers, or nodes). */
  private readonly shared: boolean;
  /**
   * A worker of a LevelDB node: its events go to the primary's single writer, which alone aggregates
   * (storage/hand-off.ts); this process takes no part in the election.
   */
  private readonly handsOff: boolean;
  /** Shared store, where this process may aggregate. */
  private readonly aggregator: Aggregator | null = null;
  /** Set once this process takes part in the aggregator's election (see joinElection). */
  private electionJoined: Promise<void> | null = null;
  /** Shared store only: meter changes handed to the aggregator. */
  private readonly commands: MeterCommands | null;
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
    registerStoreProcedures([{ name: 'metering', storeProcedures }]);
    this.journal = api.sharedStore ? this.store.journal() : null;
    this.events = this.journal ? new JournaledEvents(this.journal) : new KeyedEvents(this.store);
    // Names this process in the inboxes, meter commands and the aggregator's lease and status.
    this.processId = `${api.nodeId ?? 'node'}.${process.pid}.${ulid()}`;
    this.commands = api.sharedStore ? new MeterCommands(this.store, this.processId, this.log) : null;
    this.catalogue = new MeterCatalogue(
      this.meters,
      this.store,
      this.commands,
      { changeSite: () => this.local, refreshMeters: () => this.refreshMeters() },
      this.log,
    );
    this.eventListing = new EventListing(this.events, this.meters, { caughtUp: () => this.caughtUp(), retentionStart: () => this.retentionStart() });
    this.shared = api.sharedStore === true;
    this.handsOff = this.shared && this.journal === null && !options.primary;
    if (!this.shared) {
      this.local = this.aggregation(this.store);
      this.writer = this.local.writer;
      return;
    }
    this.writer = new Writer(this.store, writerAggregates(new AggregateLedger(this.store), this.meters), this.log, this.writerOptions(), {
      inbox: this.inbox(),
      // A hand-off is counted when the primary acknowledges it: this process's listeners hear of its events.
      committedListeners: this.handsOff ? this.committedListeners : undefined,
    });
    if (this.handsOff) return;
    this.aggregator = new Aggregator(this.store, this.processId, (fenced) => this.startTerm(fenced), this.log, (writer) => this.drainRound(writer));
  }

  /** Where ingest on a shared store puts its events (see aggregation/aggregator.ts). */
  private inbox(): Inbox {
    if (this.journal) return new JournalInbox(this.store, this.journal);
    const own = new ProcessInbox(this.store, this.processId);
    return this.handsOff ? new PrimaryHandOff(this.store, own) : own;
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
    const writer = new Writer(store, writerAggregates(ledger, this.meters), this.log, this.writerOptions(), setup);
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
    return this.shared ? null : this.local!.writer;
  }

  /** The single writer of this process, when it has one now (alone on its store, or aggregating a shared one). */
  get aggregatingWriter(): Writer | null {
    return this.local?.writer ?? null;
  }

  /**
   * The dedupe filter of this process's single writer; a LevelDB worker's shows the primary's as last
   * asked (every second). Other processes of a shared store have none: the node's metric is the largest.
   */
  get dedupeFilterSize(): { hashes: number; bytes: number } {
    return this.aggregatingWriter?.dedupeFilter.size ?? this.primaryFilter;
  }

  /** A LevelDB worker: the primary's dedupe filter, as last asked. */
  private primaryFilter = NO_AGGREGATOR.dedupe_filter;

  /**
   * Which process aggregates (null: none yet) and its dedupe filter: this process's, or on a shared store
   * the aggregator's as it reported after the round that drained what was acknowledged before this call.
   */
  async aggregatorStatus(): Promise<AggregatorStatus | NoAggregator> {
    if (this.aggregatingWriter || !this.shared) return this.ownStatus();
    // The primary's writer counts hand-offs without the rounds after which an aggregator reports: asked live.
    if (this.handsOff) {
      const status = (await this.store.nearData(STATUS_PROCEDURE, [])) as AggregatorStatus | NoAggregator;
      this.primaryFilter = status.dedupe_filter;
      return status;
    }
    await this.caughtUp();
    const reported = await this.store.get(AGGREGATOR_STATUS_KEY);
    return reported === undefined ? NO_AGGREGATOR : (JSON.parse(reported) as AggregatorStatus);
  }

  private ownStatus(): AggregatorStatus {
    return { aggregator: processOf(this.processId), dedupe_filter: this.dedupeFilterSize };
  }

  /** In the primary of a LevelDB node: the status of its single writer (or the last one reported, while it has none). */
  async primaryStatus(): Promise<AggregatorStatus | NoAggregator> {
    if (this.aggregatingWriter) return this.ownStatus();
    const reported = await this.store.get(AGGREGATOR_STATUS_KEY);
    return reported === undefined ? NO_AGGREGATOR : (JSON.parse(reported) as AggregatorStatus);
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
      this.meterRefresh = setInterval(() => {
        void this.refreshMeters().catch((err) => this.log.warn({ err }, 'metering: reloading meters failed'));
        if (this.handsOff && this.electionJoined) void this.aggregatorStatus().catch(() => undefined);
      }, REFRESH_METERS_EVERY_MS);
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
      stopServing = this.commands!.serve(fenced, (command) => this.catalogue.execute(command));
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
    if (!this.shared) return Promise.resolve();
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
    if (!this.shared) return;
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
    const metering = configs.length > 0 || view.entities('meters').length > 0;
    if (metering && !this.handsOff) await this.joinElection();
    this.applySettings({
      writer: {
        batchMaxEvents: configs.length ? Math.max(...configs.map((c) => c.batch_max_events)) : DEFAULTS.batchMaxEvents,
        batchMaxWaitMs: configs.length ? Math.min(...configs.map((c) => c.batch_max_wait_ms)) : DEFAULTS.batchMaxWaitMs,
      },
      // Purge only what no route still promises to keep.
      retentionDays: configs.length ? Math.max(...configs.map((c) => c.retention_days)) : DEFAULTS.retentionDays,
    });
    this.localQueueLimit = configs.length ? Math.max(...configs.map((c) => c.queue_max_events)) : DEFAULTS.queueMaxEvents;
    // The primary's single writer follows the workers' configuration (each reload tells it again).
    if (metering && this.handsOff) await (this.electionJoined = this.startPrimary());
    await this.catalogue.syncDeclared(view.entities('meters'));
  }

  private settings(): AggregationSettings {
    return { writer: this.writer.options, retentionDays: this.retentionDays };
  }

  /** The settings of the single writer and its maintenance (in the primary: as the workers' configuration says). */
  applySettings(settings: AggregationSettings): void {
    this.writer.options = settings.writer;
    this.retentionDays = settings.retentionDays;
    if (this.local) {
      this.local.writer.options = this.writer.options;
      this.local.maintenance.retentionDays = this.retentionDays;
    }
  }

  // ---- events ----

  async ingest(events: PreparedEvent[], config: Pick<MeteringConfig, 'queue_max_events'>): Promise<void> {
    await this.writer.submit(events, config.queue_max_events);
  }

  /**
   * Shared store: takes part in the election of the aggregator once metering is used here (a metering
   * route, a declared meter, events from another plugin), not before: a node that meters nothing runs no
   * election and takes no lease.
   */
  joinElection(): Promise<void> {
    if (this.handsOff) return (this.electionJoined ??= this.startPrimary());
    if (!this.aggregator) return Promise.resolve();
    return (this.electionJoined ??= this.aggregator.start());
  }

  /** A LevelDB worker: starts the primary's single writer if it has not started, with this process's settings. */
  private async startPrimary(): Promise<void> {
    await this.store.nearData(AGGREGATE_PROCEDURE, [this.settings()]);
  }

  /**
   * In the primary of a LevelDB node: a worker's hand-off, committed by this process's single writer
   * (its term's: LeaseLostError while it has none, and the worker puts the events in its inbox).
   * Resolves once durable, with the indices of the events counted (not duplicates).
   */
  async commitHandedOff(events: PreparedEvent[]): Promise<number[]> {
    const writer = this.local?.writer;
    if (!writer) throw new LeaseLostError();
    // The workers bound their own queues; at most one hand-off of each is in flight.
    const counted = new Set(await writer.submit(events, Infinity));
    return events.flatMap((event, index) => (counted.has(event) ? [index] : []));
  }

  /** LocalIngest: events produced in this process, each validated alone. */
  ingestLocal(events: readonly unknown[]): Promise<RefusedEvent[]> {
    void this.joinElection();
    const now = Date.now();
    const retentionDays = this.retentionDays;
    const context = {
      now,
      retentionStart: Math.floor(now / 1000) - retentionDays * 86_400,
      retentionDays,
      metersOf: (type: string) => this.meters.aggregating(type),
    };
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
          refused.push({ index, reason: err.message, code: err.code });
        }
      });
    }
    if (prepared.length === 0) return Promise.resolve(refused);
    return this.writer.submit(prepared, this.localQueueLimit).then(() => refused);
  }

  // ---- queries ----

  async query(record: MeterRecord, query: MeterQuery, waitMs: number): Promise<QueryResult> {
    await this.caughtUp();
    if (!(await this.meters.whenReady(record.id, waitMs))) {
      const progress = this.meters.get(record.id)?.backfill;
      const percent = progress && progress.upTo > 0 ? Math.floor((progress.cursor / progress.upTo) * 100) : 0;
      throw meterBackfilling(record.key, percent);
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

/**
 * The single writer of a LevelDB node of workers runs in its primary, where the database is: one
 * service per plugin namespace, made by the first worker that meters and closed before the store.
 */
const primaryServices = new WeakMap<Store, Promise<MeteringService>>();

function primaryService(store: Store, host: ProcedureHost): Promise<MeteringService> {
  let service = primaryServices.get(store);
  if (!service) {
    service = (async () => {
      const primary = new MeteringService({ store, log: host.log.child({ plugin: 'metering' }), sharedStore: true, nodeId: host.nodeId }, { primary: true });
      host.onClose(() => primary.close());
      await primary.open();
      await primary.joinElection();
      return primary;
    })();
    // A start that failed (the store refused a write) is tried again by the next call.
    service.catch(() => primaryServices.delete(store));
    primaryServices.set(store, service);
  }
  return service;
}

/** The key of `metering.<key>` among the plugin's procedures. */
const keyOf = (procedure: string) => procedure.slice('metering.'.length);

/** The plugin's store procedures (PluginDefinition.storeProcedures): `metering.<key>`. */
export const storeProcedures: Record<string, StoreProcedure> = {
  ...meteringProcedures,
  [keyOf(HAND_OFF_PROCEDURE)]: async (store, [lines], host) =>
    (await primaryService(store, host)).commitHandedOff(eventsOf(lines as string)),
  [keyOf(AGGREGATE_PROCEDURE)]: async (store, [settings], host) =>
    (await primaryService(store, host)).applySettings(settings as AggregationSettings),
  // No worker metered yet: nothing aggregates, and asking starts nothing.
  [keyOf(STATUS_PROCEDURE)]: async (store) => (await primaryServices.get(store))?.primaryStatus() ?? NO_AGGREGATOR,
};
