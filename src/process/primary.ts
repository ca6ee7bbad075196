/** The primary process of a multi-process node (cluster.ts describes the node as a whole). */
import cluster, { type Worker } from 'node:cluster';
import type { Duplex } from 'node:stream';
import { parseListenList } from '../config/listen.ts';
import { loadConfigFile } from '../config/load.ts';
import type { GatewayConfig } from '../config/types.ts';
import { EXIT } from '../cli/command.ts';
import { logRefusedConfiguration, startFailureExitCode, startFailureLines, startupStep, usableDataDir } from '../gateway.ts';
import type { QuotaReservation } from './exchange.ts';
import { STORE_FD, GATHER_TIMEOUT_MS, type QuotaOp, type ToPrimary, type ToWorker } from './messages.ts';
import { QuotaCounters } from './quota-counters.ts';
import { WindowCounters } from './window-counters.ts';
import { nodeSecretEnvironment } from './node-secret.ts';
import { removePidFile, writePidFile } from './pid-file.ts';
import { stopOnSignals } from './stop-signals.ts';
import { createLogger, createLogging, type Logger } from '../log.ts';
import { nodeIdOf } from '../node-id.ts';
import type { PluginRegistry } from '../pdk/types.ts';
import { NoticeHub, serveStore } from '../store/ipc.ts';
import { closeStoreProcedures, hostStoreProcedures, registerStoreProcedures } from '../store/procedures.ts';
import type { LevelStore } from '../store/level.ts';
import { openEmbeddedStore, postgresSettings } from '../store/open.ts';
import { PostgresStore } from '../store/postgres/store.ts';
import { loadTlsMaterial } from '../tls.ts';

const SWEEP_INTERVAL_MS = 60_000;
/** A worker that dies sooner than this after it started counts as crash-looping: its replacement waits longer. */
const STABLE_AFTER_MS = 5_000;
const RESTART_DELAY_MS = [100, 500, 1_000, 5_000, 10_000];
/** Beyond the configured shutdown_timeout, how long a worker may take to close before it is killed. */
const STOP_GRACE_MS = 10_000;

/** A gather the primary relays: the workers still to answer, and the values so far. */
interface Collection {
  waiting: Set<Worker>;
  values: unknown[];
  done: () => void;
}

interface Slot {
  number: number;
  worker: Worker | null;
  startedAt: number;
  /** Deaths in a row within STABLE_AFTER_MS of starting. */
  crashes: number;
  listening: boolean;
  /** Set when the primary asked the worker to stop (the node's stop, or the worker's own SIGTERM). */
  stopRequested: boolean;
}

export class Primary {
  private readonly slots: Slot[];
  private readonly log: Logger;
  /** The lines `tollgate start` prints whatever log_level says (listeners, started, shutting down), as one process does. */
  private readonly announce: Logger;
  private store: LevelStore | undefined;
  private hub: NoticeHub | undefined;
  private nodeId = '';
  private started = false;
  private stopping = false;
  private sweeper: NodeJS.Timeout | undefined;
  private exitCode = 0;
  private pidFile: string | undefined;
  private stopped: (code: number) => void = () => {};
  private readonly collections = new Map<number, Collection>();
  private collectionSeq = 0;
  /** The node's counters (NodeExchange.admit): here, where every worker reaches them. */
  private readonly counters = new WindowCounters();
  /** The node's quota counters (NodeExchange.reserve and adjust). */
  private readonly quotas = new QuotaCounters();

  constructor(
    private readonly configFile: string,
    private readonly config: GatewayConfig,
    private readonly plugins: PluginRegistry,
    count: number,
    private readonly pidFileOption: string | undefined,
  ) {
    this.log = createLogging(config.gateway.log_level).log.child({ process: 'primary' });
    // The workers' plugins run their store procedures here, where LevelDB is.
    registerStoreProcedures(plugins.values());
    this.announce = createLogger('info').child({ process: 'primary' });
    this.slots = Array.from({ length: count }, (_, i) => ({ number: i + 1, worker: null, startedAt: 0, crashes: 0, listening: false, stopRequested: false }));
  }

  /** Starts the workers; resolves with the exit code once every one is gone and the store is closed. */
  async run(): Promise<number> {
    try {
      await this.prepare();
    } catch (err) {
      for (const line of startFailureLines(err, this.configFile)) console.error(line);
      await this.store?.close().catch(() => undefined);
      return startFailureExitCode(err);
    }
    const done = new Promise<number>((resolve) => (this.stopped = resolve));
    cluster.schedulingPolicy = cluster.SCHED_NONE;
    cluster.setupPrimary({ stdio: this.store ? ['inherit', 'inherit', 'inherit', 'ipc', 'pipe'] : ['inherit', 'inherit', 'inherit', 'ipc'] });
    for (const slot of this.slots) this.fork(slot);
    stopOnSignals((reason) => this.stop(reason), this.announce);
    process.on('SIGHUP', () => void this.reload());
    // nginx's USR1: the workers reopen their log files (file-log), after an operator rotated them.
    process.on('SIGUSR1', () => {
      for (const slot of this.slots) slot.worker?.process.kill('SIGUSR1');
    });
    process.on('uncaughtException', (err) => this.log.error({ err }, 'uncaught exception'));
    process.on('unhandledRejection', (err) => this.log.error({ err }, 'unhandled rejection'));
    return done;
  }

  /** What every worker needs before it starts: the data directory, the TLS files, the store, the node id. */
  private async prepare(): Promise<void> {
    const { gateway } = this.config;
    await usableDataDir(gateway.data_dir, this.log);
    // Generated once here, or every worker would generate its own self-signed certificate at once.
    const listens = [...parseListenList(gateway.proxy_listen).specs, ...parseListenList(gateway.admin_listen).specs];
    if (listens.some((s) => s.ssl)) await loadTlsMaterial(gateway.ssl_cert, gateway.ssl_cert_key, gateway.data_dir);
    if (gateway.database === 'leveldb') {
      const store = (this.store = await startupStep(() => openEmbeddedStore(gateway.data_dir)));
      this.hub = new NoticeHub(store.localNotices);
      store.shareNotices(this.hub);
      this.nodeId = await nodeIdOf(gateway.data_dir, () => store.namespace('core').get('node_id'));
      hostStoreProcedures(this.log, this.nodeId);
      this.sweeper = setInterval(() => void store.sweepExpired().catch((err) => this.log.error({ err }, 'store sweep failed')), SWEEP_INTERVAL_MS).unref();
    } else {
      // Reached and migrated once here, so that a wrong password is one clear error, not one per worker.
      const probe = new PostgresStore(postgresSettings(gateway));
      try {
        await startupStep(() => probe.open());
      } finally {
        await probe.close();
      }
      this.nodeId = await nodeIdOf(gateway.data_dir);
    }
  }

  private fork(slot: Slot): void {
    const worker = cluster.fork({ TOLLGATE_WORKER: String(slot.number), TOLLGATE_NODE_ID: this.nodeId, TOLLGATE_STORE: this.store ? 'ipc' : '', ...nodeSecretEnvironment() });
    Object.assign(slot, { worker, startedAt: Date.now(), listening: false, stopRequested: false });
    if (this.store) serveStore(this.store, this.hub!, worker.process.stdio![STORE_FD] as unknown as Duplex);
    worker.on('message', (message: ToPrimary) => this.received(slot, worker, message));
    worker.on('exit', (code, signal) => this.exited(slot, worker, code, signal));
  }

  private received(slot: Slot, worker: Worker, message: ToPrimary): void {
    if (message.type === 'gather') return this.gatherFor(worker, message.id, message.topic, message.argument);
    if (message.type === 'collected') return this.collected(worker, message.id, message.value);
    if (message.type === 'retire') return this.retire(slot, worker);
    if (message.type === 'admit') {
      const admission = this.counters.admit(message.keys, message.limits, message.ttlsMs, message.requests);
      this.tell(worker, { type: 'admitted', id: message.id, admission });
      return;
    }
    if (message.type === 'quota') return this.quota(worker, message.ops);
    if (message.type !== 'listening') return;
    slot.listening = true;
    // Only now: a worker hears messages once it has started (earlier ones would be lost).
    this.broadcastPids();
    if (this.started || !this.slots.every((s) => s.listening)) return;
    this.started = true;
    try {
      this.pidFile = writePidFile(this.pidFileOption, this.config.gateway.data_dir);
    } catch (err) {
      console.error(`tollgate: ${(err as Error).message}`);
      return this.stop('no pid file', 1);
    }
    for (const line of message.lines) this.announce.info(line);
    this.announce.info(
      { config: this.configFile, pid_file: this.pidFile, workers: this.slots.length },
      `started, pid ${process.pid} (in ${this.pidFile}) with ${this.slots.length} worker processes: SIGHUP reloads ${this.configFile}, SIGTERM stops`,
    );
  }

  /** Asks every listening worker for its value of `topic` and answers `requester` with them all. */
  private gatherFor(requester: Worker, requestId: number, topic: string, argument: string | undefined): void {
    const id = ++this.collectionSeq;
    const workers = this.slots.flatMap((s) => (s.listening && s.worker?.isConnected() ? [s.worker] : []));
    const collection: Collection = { waiting: new Set(workers), values: [], done: () => {} };
    const timer = setTimeout(() => collection.done(), GATHER_TIMEOUT_MS);
    collection.done = () => {
      clearTimeout(timer);
      this.collections.delete(id);
      this.tell(requester, { type: 'gathered', id: requestId, values: collection.values });
    };
    this.collections.set(id, collection);
    for (const worker of workers) this.tell(worker, { type: 'collect', id, topic, argument });
    if (workers.length === 0) collection.done();
  }

  private collected(worker: Worker, id: number, value: unknown): void {
    const collection = this.collections.get(id);
    if (!collection?.waiting.delete(worker)) return;
    if (value !== undefined) collection.values.push(value);
    if (collection.waiting.size === 0) collection.done();
  }

  /** A worker's quota operations, applied in its order; the reservations answered in one message. */
  private quota(worker: Worker, ops: QuotaOp[]): void {
    const reservations: [number, QuotaReservation][] = [];
    for (const op of ops) {
      if ('reserve' in op) reservations.push([op.id, this.quotas.reserve(op.reserve)]);
      else this.quotas.adjust(op.adjust, op.delta);
    }
    if (reservations.length > 0) this.tell(worker, { type: 'reserved', reservations });
  }

  /**
   * A worker's own SIGTERM: stopped gracefully, then replaced. Ignored while the node stops (the same
   * signal reached the primary too, which orders every worker) or when asked already.
   */
  private retire(slot: Slot, worker: Worker): void {
    if (this.stopping || slot.worker !== worker || slot.stopRequested) return;
    slot.stopRequested = true;
    this.log.info({ worker: slot.number, workerPid: worker.process.pid }, 'a worker got SIGTERM: stopping it gracefully');
    this.tell(worker, { type: 'stop' });
  }

  private exited(slot: Slot, worker: Worker, code: number | null, signal: string | null): void {
    for (const collection of this.collections.values()) {
      if (collection.waiting.delete(worker) && collection.waiting.size === 0) collection.done();
    }
    if (slot.worker !== worker) return;
    slot.worker = null;
    this.broadcastPids();
    if (this.stopping) {
      if (this.slots.every((s) => s.worker === null)) void this.finish();
      return;
    }
    if (!this.started && !slot.listening) {
      // A worker that cannot start (a taken port, a database refusing it) has said why; the node cannot serve,
      // and exits with the worker's code when that says a restart cannot help (a damaged store).
      console.error(`tollgate: worker ${slot.number} failed to start (exit code ${code ?? signal}); stopping`);
      this.stop('startup failure', code === EXIT.storeDamaged ? EXIT.storeDamaged : EXIT.failure);
      return;
    }
    const facts = { worker: slot.number, workerPid: worker.process.pid, code, signal };
    let delay = RESTART_DELAY_MS[0];
    if (slot.stopRequested && code === 0) {
      this.log.info(facts, 'a worker stopped as asked; starting another');
    } else {
      slot.crashes = Date.now() - slot.startedAt < STABLE_AFTER_MS ? slot.crashes + 1 : 0;
      delay = RESTART_DELAY_MS[Math.min(slot.crashes, RESTART_DELAY_MS.length - 1)];
      this.log.error({ ...facts, restartInMs: delay }, 'a worker process exited; starting another');
    }
    setTimeout(() => {
      if (!this.stopping && slot.worker === null) this.fork(slot);
    }, delay);
  }

  /**
   * Sends to a connected worker. One that is exiting may have closed its end before the primary hears
   * of it: the send then fails (EPIPE), which is no fault of the node's (exited() handles the exit) and,
   * without a callback, would reach the uncaught exception handler and print a stack trace.
   */
  private tell(worker: Worker, message: ToWorker): void {
    if (worker.isConnected()) worker.send(message, () => undefined);
  }

  private broadcastPids(): void {
    const message: ToWorker = { type: 'pids', master: process.pid, workers: this.slots.flatMap((s) => (s.worker?.process.pid ? [s.worker.process.pid] : [])) };
    for (const slot of this.slots) if (slot.listening && slot.worker) this.tell(slot.worker, message);
  }

  /** The primary checks the file, then every worker re-reads it; one line says how it went. */
  private async reload(): Promise<void> {
    // Checked here first: an invalid file is reported once for the node, not once by every worker.
    const loaded = await loadConfigFile(this.configFile, this.plugins);
    if (!loaded.ok) return logRefusedConfiguration(this.log, loaded.errors);
    // The primary's own lines follow the file as the workers' do (log_level applies at once).
    this.log.level = loaded.config.gateway.log_level;
    const workers = this.slots.flatMap((s) => (s.worker?.isConnected() ? [s.worker] : []));
    const answers = workers.map(
      (worker) =>
        new Promise<ToPrimary & { type: 'reloaded' }>((resolve) => {
          const onMessage = (m: ToPrimary) => {
            if (m.type !== 'reloaded') return;
            worker.off('message', onMessage);
            resolve(m);
          };
          worker.on('message', onMessage);
          worker.once('exit', () => resolve({ type: 'reloaded', ok: false, errors: 0, refused: 'the worker exited' }));
          this.tell(worker, { type: 'reload' });
        }),
    );
    void Promise.all(answers).then((results) => {
      // A worker that failed anyway (the file changed meanwhile) logged its own details; this is the node's outcome.
      const failed = results.find((r) => !r.ok);
      if (!failed) this.log.info({ workers: results.length }, 'configuration reloaded on every worker');
      else if (failed.refused) this.log.error({ reason: failed.refused }, 'reload refused: keeping the current configuration');
      else this.log.error({ errors: failed.errors }, `configuration invalid (${failed.errors} ${failed.errors === 1 ? 'error' : 'errors'}): keeping the current one`);
    });
  }

  private stop(reason: string, exitCode = 0): void {
    if (this.stopping) return;
    this.stopping = true;
    this.exitCode = exitCode;
    this.announce.info({ reason }, 'shutting down');
    clearInterval(this.sweeper);
    const live = this.slots.filter((s) => s.worker !== null);
    if (live.length === 0) {
      void this.finish();
      return;
    }
    for (const slot of live) {
      slot.stopRequested = true;
      if (slot.worker!.isConnected()) this.tell(slot.worker!, { type: 'stop' });
      else slot.worker!.process.kill('SIGTERM');
    }
    setTimeout(() => {
      for (const slot of this.slots) slot.worker?.process.kill('SIGKILL');
    }, this.config.gateway.shutdown_timeout + STOP_GRACE_MS).unref();
  }

  /** Every worker is gone: the store closes (everything acknowledged is written), then the primary exits. */
  private async finish(): Promise<void> {
    try {
      // What procedures keep here (metering's single writer) is written before the store closes.
      await closeStoreProcedures().catch((err) => this.log.error({ err }, 'closing the services of store procedures failed'));
      await this.store?.close();
    } catch (err) {
      this.log.error({ err }, 'closing the store failed');
      this.exitCode = 1;
    }
    if (this.pidFile) removePidFile(this.pidFile);
    this.log.flush();
    this.announce.flush();
    this.stopped(this.exitCode);
  }
}
