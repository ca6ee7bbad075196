/**
 * The gateway process: loads the config, opens the store, creates the plugins, opens the listeners,
 * swaps configurations on reload and shuts down gracefully.
 */
import cluster from 'node:cluster';
import { access, constants } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { certificateAdminRoutes } from './admin/certificate-routes.ts';
import { discoveryAdminRoutes } from './admin/discovery-routes.ts';
import { isLoopbackName, type AdminListenerFacts } from './admin/browser-guard.ts';
import { AdminRouter } from './admin/router.ts';
import { coreAdminRoutes } from './admin/routes.ts';
import { schemaAdminRoutes } from './admin/schema-routes.ts';
import { upstreamAdminRoutes } from './admin/upstream-routes.ts';
import type { HealthChange } from './balancer/balancers.ts';
import { workerCount } from './config/entities.ts';
import { parseListenList } from './config/listen.ts';
import { loadConfigFile, loadConfigText, type ApiEntities, type LoadResult } from './config/load.ts';
import { EntityWriter, type EntityWriteAccess } from './admin/entity-writes.ts';
import { EMPTY_DOCUMENT, StoredEntities, type EntityDocument, type ReadDocument } from './stored-entities.ts';
import type { GatewayConfig } from './config/types.ts';
import { consumerByReference, Consumers } from './consumers.ts';
import { KeptEntityDirectories } from './kept-entities.ts';
import { preparePrivateDir } from './data-dir.ts';
import { keepTimestampsOrLog } from './entity-timestamps.ts';
import { ConfigError, ConfigLoadError, OneProcessConfigError, StartupError } from './errors.ts';
import { Listener } from './listeners.ts';
import { createLogging, type AccessLog, type Logger } from './log.ts';
import { Metrics } from './metrics.ts';
import { nodeIdOf } from './node-id.ts';
import { Lifecycle, type ListenerInfo } from './pipeline/lifecycle.ts';
import type { AdminRoute, ConfigView, PluginRegistry, PluginRuntime, PluginServices } from './pdk/types.ts';
import type { ProtocolProxy } from './pipeline/proxy-step.ts';
import { GrpcProxy } from './proxy/grpc.ts';
import { HttpEngine } from './proxy/http-engine.ts';
import { WebSocketProxy } from './proxy/websocket.ts';
import { Snapshot } from './snapshot.ts';
import { StoreDamagedError, StoreError } from './store/errors.ts';
import { registerStoreProcedures } from './store/procedures.ts';
import { EXIT } from './cli/command.ts';
import { openStore, postgresSettings } from './store/open.ts';
import { SoleNodeLock } from './store/postgres/lock.ts';
import { PostgresStore } from './store/postgres/store.ts';
import type { StoreAdapter } from './store/store.ts';
import { loadTlsMaterial } from './tls.ts';
import { pluginsKeepingOneProcess } from './config/process-model.ts';
import { LocalExchange, type NodeExchange } from './process/exchange.ts';

const SWEEP_INTERVAL_MS = 60_000;
/** GET /status and /status/ready answer within this even when the database does not. */
const REACHABLE_TIMEOUT_MS = 2_000;
/** Notices carrying health set through the admin API to every process sharing the store. */
const TARGET_HEALTH_TOPIC = 'target-health';

/** Node settings bound to listeners, the store, processes or upstream pools: a reload cannot change them. */
const RESTART_SETTINGS = [
  'proxy_listen', 'admin_listen', 'data_dir', 'ssl_cert', 'ssl_cert_key', 'max_header_size', 'client_timeout',
  'upstream_keepalive_pool_size', 'upstream_keepalive_idle_timeout', 'database', 'pg_host', 'pg_port', 'pg_user',
  'pg_password', 'pg_database', 'pg_schema', 'pg_ssl', 'pg_ssl_verify', 'pg_pool_size',
  'worker_processes', 'db_update_frequency',
] as const;

/** The exit code of a failed start: a damaged store has its own, as restarting cannot help. */
export function startFailureExitCode(err: unknown): number {
  const damaged = err instanceof StoreDamagedError || (err as Error | undefined)?.cause instanceof StoreDamagedError;
  return damaged ? EXIT.storeDamaged : EXIT.failure;
}

/** What to tell the operator when a start fails: every line of it. */
export function startFailureLines(err: unknown, configFile: string): string[] {
  if (err instanceof ConfigLoadError) return [...err.errors.map(String), `${configFile}: invalid configuration, not starting`];
  if (err instanceof StartupError || err instanceof StoreError) return [`tollgate: ${err.message}`];
  return [`tollgate: failed to start: ${(err as Error)?.stack ?? String(err)}`];
}

export interface GatewayOptions {
  /** Overrides the config's log level (tests use 'silent'). */
  logLevel?: string;
  /** The plugins this gateway knows: the command line's bundled list (src/cli.ts), or a test's own. */
  registry: PluginRegistry;
  /** An opened store to use instead of opening the configured one (a worker's link to its primary); closed at stop. */
  store?: StoreAdapter;
  /** The node's id, when the process that started this one knows it. */
  nodeId?: string;
  /** Whether this process sweeps expired entries (one process per node is enough). Default true. */
  sweep?: boolean;
  /** The node's processes, for `GET /` (default: this one alone). */
  processes?: () => { master: number; workers: number[] };
  /** What the node's processes share on demand (default: this process alone). */
  exchange?: NodeExchange;
}

/** What a reload of an invalid file logs: each error on a line of its own, then the outcome. */
export function logRefusedConfiguration(log: Logger, errors: readonly ConfigError[]): void {
  for (const e of errors) log.error({ error: String(e), code: e.code }, 'invalid configuration');
  const count = errors.length === 1 ? '1 error' : `${errors.length} errors`;
  log.error(`configuration invalid (${count}): keeping the current one`);
}

export class Gateway {
  readonly proxyListeners: Listener[] = [];
  readonly adminListeners: Listener[] = [];
  private snapshot!: Snapshot;
  private readonly runtimes = new Map<string, PluginRuntime>();
  /** Each plugin's `keptByCore` entities, by plugin name. */
  private readonly keptEntities = new Map<string, KeptEntityDirectories>();
  private draining = false;
  private sweeper: NodeJS.Timeout | undefined;
  private stopping: Promise<void> | undefined;
  /** The reload in progress: reloads run one after the other, so the last file read is the one that stays. */
  private reloading: Promise<unknown> = Promise.resolve();
  private nodeId = '';
  /** The store came from the process that started this one (GatewayOptions.store). */
  private storeHandedIn = false;
  private logLevelOverride: string | undefined;
  private processes: () => { master: number; workers: number[] } = () => ({ master: process.pid, workers: [process.pid] });
  private exchange: NodeExchange = new LocalExchange();
  /** A worker of a node of several processes (the primary supervises it). */
  private inNodeOfSeveral = false;
  /** Held while plugins that keep state in one process run on PostgreSQL: no second node meanwhile. */
  private soleNode: SoleNodeLock | undefined;
  readonly lifecycle: Lifecycle;
  private readonly engine: HttpEngine;
  private readonly protocols: ProtocolProxy;
  private readonly metrics = new Metrics();
  /** The services, routes and plugins created through the admin API (a shared store only). */
  private stored!: StoredEntities;
  /** The stored document the running configuration was built with. */
  private applied: EntityDocument = EMPTY_DOCUMENT;
  /** A stored version that failed to build here (logged once, not at every poll). */
  private refusedVersion = 0;
  private storedPoller: NodeJS.Timeout | undefined;
  private refreshFailing = false;

  private constructor(
    private readonly configFile: string,
    config: GatewayConfig,
    readonly log: Logger,
    private readonly accessLog: AccessLog,
    private readonly store: StoreAdapter,
    private readonly consumers: Consumers,
    private readonly registry: PluginRegistry,
  ) {
    this.engine = new HttpEngine({ poolSize: config.gateway.upstream_keepalive_pool_size, idleTimeoutSec: config.gateway.upstream_keepalive_idle_timeout });
    const grpc = new GrpcProxy({ idleTimeoutSec: config.gateway.upstream_keepalive_idle_timeout, log });
    const websocket = new WebSocketProxy();
    this.protocols = {
      grpc: (request, handlers) => grpc.proxy(request, handlers),
      grpcUnary: (request, handlers) => grpc.unary(request, handlers),
      upgrade: (request, handlers) => websocket.proxy(request, handlers),
      close: () => {
        grpc.close();
        websocket.close();
      },
    };
    this.lifecycle = new Lifecycle(() => this.snapshot, this.engine, this.protocols, this.metrics, log, accessLog);
    this.accessLog.enabled = config.gateway.access_log;
  }

  static async start(configFile: string, options: GatewayOptions): Promise<Gateway> {
    const { registry } = options;
    registerStoreProcedures(registry.values());
    const loaded = await loadConfigFile(configFile, registry);
    if (!loaded.ok) throw new ConfigLoadError(loaded.errors);
    const config = loaded.config;
    const { log, access } = createLogging(options.logLevel ?? config.gateway.log_level);
    await usableDataDir(config.gateway.data_dir, log);
    const store = options.store ?? (await startupStep(() => openStore(config.gateway, (message, err) => log.warn({ err }, message))));
    const consumers = new Consumers(store.namespace('core'), log.child({ component: 'consumers' }));
    const gateway = new Gateway(configFile, config, log, access, store, consumers, registry);
    gateway.stored = new StoredEntities(store.namespace('core'));
    gateway.logLevelOverride = options.logLevel;
    gateway.storeHandedIn = options.store !== undefined;
    if (options.processes) gateway.processes = options.processes;
    if (options.exchange) gateway.exchange = options.exchange;
    gateway.metrics.shareThrough(gateway.exchange);
    gateway.inNodeOfSeveral = options.processes !== undefined;
    // Each worker on PostgreSQL has its own connection: admin changes reach its siblings through the primary.
    if (gateway.inNodeOfSeveral && store instanceof PostgresStore) store.notices.shareWithinNode(gateway.exchange);
    try {
      gateway.refuseOneProcessConfig(config);
      await consumers.load();
      gateway.followTargetHealth();
      // Only the embedded store is this node's own: an id found in a shared database belongs to another node.
      const earlier = config.gateway.database === 'leveldb' ? () => store.namespace('core').get('node_id') : undefined;
      gateway.nodeId = options.nodeId ?? (await nodeIdOf(config.gateway.data_dir, earlier));
      await gateway.claimSoleNode(config);
      const effective = await gateway.withStoredEntities(config);
      await gateway.createPlugins(effective);
      await gateway.apply(effective);
      gateway.followStoredEntities(effective);
      await gateway.openListeners(effective);
    } catch (err) {
      await gateway.stop();
      throw err;
    }
    if (options.sweep ?? true) gateway.sweeper = setInterval(() => gateway.sweep(), SWEEP_INTERVAL_MS).unref();
    return gateway;
  }

  /** The file's configuration with the admin API's entities of the store, validated whole (a conflict between them refuses the start). */
  private async withStoredEntities(config: GatewayConfig): Promise<GatewayConfig> {
    const { document } = await this.stored.read();
    if (document.version === 0) return config;
    const loaded = this.build(config, document);
    if (!loaded.ok) throw new ConfigLoadError(loaded.errors);
    this.applied = document;
    return loaded.config;
  }

  private build(file: GatewayConfig, entities: ApiEntities): LoadResult {
    return loadConfigText(file.text, file.file, this.registry, this.configFile, entities);
  }

  /** Applies what another process wrote: on its notice, and at the latest every db_update_frequency. */
  private followStoredEntities(config: GatewayConfig): void {
    this.stored.follow(() => this.refreshStoredEntities());
    const every = config.gateway.db_update_frequency * 1000;
    this.storedPoller = setInterval(() => void this.refreshStoredEntities(), every).unref();
  }

  /**
   * In turn with reloads, so that the last configuration built is the one that stays. A store that cannot
   * be read is logged once until it can again, not at every poll.
   */
  private refreshStoredEntities(): Promise<unknown> {
    const next = this.reloading.then(() => this.refreshStoredNow());
    this.reloading = next.then(
      () => (this.refreshFailing = false),
      (err) => {
        if (!this.refreshFailing) this.log.error({ err }, "applying the admin API's entities failed: retrying every db_update_frequency");
        this.refreshFailing = true;
      },
    );
    return this.reloading;
  }

  private async refreshStoredNow(): Promise<void> {
    if (this.draining) return;
    const version = await this.stored.version();
    if (version === this.applied.version || version === this.refusedVersion) return;
    const read = await this.stored.read();
    const loaded = this.build(this.snapshot.config, read.document);
    if (!loaded.ok) {
      // Validated whole before it was written: only a gateway.yaml other than the writer's can refuse it.
      this.refusedVersion = read.document.version;
      logRefusedConfiguration(this.log, loaded.errors);
      return;
    }
    await this.apply(loaded.config);
    this.applied = read.document;
    this.log.info({ version: read.document.version, hash: loaded.config.hash }, 'configuration changed through the admin API applied');
  }

  /** The admin API's writes of services, routes and plugins; a consumer's deletion takes its plugins along. */
  private entityWriter(): EntityWriter {
    const writer = new EntityWriter(this.entityWriteAccess());
    this.consumers.onRemoved(async (consumer, byThisProcess) => {
      if (!byThisProcess) return;
      try {
        await writer.deletePluginsOfConsumer(consumer.id);
      } catch (err) {
        this.log.error({ err, consumer: consumer.id }, "deleting a deleted consumer's plugins failed: they match no request meanwhile");
      }
    });
    return writer;
  }

  private entityWriteAccess(): EntityWriteAccess {
    return {
      shared: this.snapshot.config.gateway.database === 'postgres' || this.storeHandedIn,
      config: () => this.snapshot.config,
      applied: () => this.applied,
      read: () => this.stored.read(),
      build: (entities) => this.build(this.snapshot.config, entities),
      runtimeConsumerId: (key) => consumerByReference(this.consumers, key)?.id,
      refusal: (config) => this.oneProcessRefusal(config),
      commit: (read, next) => this.commitStoredEntities(read, next),
      log: this.log.child({ component: 'admin' }),
      writes: this.metrics.plugins.counter({
        name: 'tollgate_admin_entity_writes_total',
        help: 'Services, routes and plugins created, updated or deleted through the admin API',
        labelNames: ['entity', 'operation'],
      }),
    };
  }

  /**
   * A plugin that keeps state in one process cannot come through the admin API: the store is shared by
   * several processes or nodes there, which would corrupt that state (the file alone can bring one, and
   * the node then runs as one process, one node).
   */
  private oneProcessRefusal(config: GatewayConfig): string | undefined {
    const running = new Set(pluginsKeepingOneProcess(this.registry, this.snapshot.config.plugins, this.snapshot.config.entities));
    const names = pluginsKeepingOneProcess(this.registry, config.plugins, config.entities).filter((name) => !running.has(name));
    if (names.length === 0) return undefined;
    return `plugin ${names.map((n) => `'${n}'`).join(', ')} keeps state in one process: it cannot be configured on a store shared by several processes or nodes`;
  }

  /** Stores a change if nothing was written since `read`; resolves once every process of this node applied it. */
  private async commitStoredEntities(read: ReadDocument, next: ApiEntities): Promise<boolean> {
    const document = await this.stored.replace(read, next);
    if (!document) return false;
    await this.stored.announce(document.version);
    return true;
  }

  /**
   * On PostgreSQL, plugins that keep state in one process (no `multiProcess`) would corrupt each other's
   * data from two nodes: the first node takes a lock, and another one is refused until it stops.
   */
  private async claimSoleNode(config: GatewayConfig): Promise<void> {
    if (config.gateway.database !== 'postgres') return;
    const singleProcess = pluginsKeepingOneProcess(this.registry, config.plugins, config.entities);
    if (singleProcess.length === 0 || this.soleNode?.held) return;
    this.soleNode ??= new SoleNodeLock(postgresSettings(config.gateway), (message, err) => this.log.error({ err }, message));
    if (!(await startupStep(() => this.soleNode!.acquire()))) {
      throw new StartupError(`another gateway node is running on this database, and plugin ${singleProcess.map((n) => `'${n}'`).join(', ')} keeps state in one node: stop that node first`);
    }
  }

  private refuseOneProcessConfig(config: GatewayConfig): void {
    if (this.inNodeOfSeveral && config.oneProcessBecause) throw new OneProcessConfigError(config.oneProcessBecause);
  }

  /** Health set through any process's admin API applies in this one (Kong broadcasts it to its cluster). */
  private followTargetHealth(): void {
    this.store.namespace('balancer').notices.subscribe(TARGET_HEALTH_TOPIC, (message) => {
      // A lost notice (null) leaves health as it is: probes and traffic keep correcting it.
      if (message === null) return;
      try {
        const { upstream, target, healthy } = JSON.parse(message) as { upstream: string; target: string; healthy: boolean };
        this.snapshot?.balancers.setHealth(upstream, target, healthy);
      } catch (err) {
        this.log.warn({ err }, 'unreadable target health notice');
      }
    });
  }

  private setTargetHealth(upstream: string, target: string, healthy: boolean): HealthChange {
    const change = this.snapshot.balancers.check(upstream, target);
    if (change !== 'done') return change;
    this.store.namespace('balancer').notices.publish(TARGET_HEALTH_TOPIC, JSON.stringify({ upstream, target, healthy }));
    return 'done';
  }

  private async createPlugins(config: GatewayConfig): Promise<void> {
    const provided = new Map<string, unknown>();
    const services: PluginServices = {
      provide: (name, service) => {
        if (provided.has(name)) throw new Error(`plugin service ${name} is provided twice`);
        provided.set(name, service);
      },
      get: <T>(name: string) => provided.get(name) as T | undefined,
    };
    for (const definition of this.registry.values()) {
      const store = this.store.namespace(`plugin.${definition.name}`);
      const log = this.log.child({ plugin: definition.name });
      const kept = new KeptEntityDirectories(definition, store, this.consumers, log);
      this.keptEntities.set(definition.name, kept);
      const runtime = await definition.create({
        store,
        log,
        consumers: this.consumers,
        dataDir: config.gateway.data_dir,
        nodeId: this.nodeId,
        // A node of several processes runs each gateway in a cluster worker; anything else is alone.
        processesOnNode: cluster.isWorker ? workerCount(config.gateway.worker_processes) : 1,
        // A store handed in is a worker's link to its node's primary: other workers write it too.
        sharedStore: config.gateway.database === 'postgres' || this.storeHandedIn,
        nodesShareStore: config.gateway.database === 'postgres',
        services,
        metrics: this.metrics.plugins,
        node: this.exchange,
        status: {
          server: () => this.metrics.serverCounts(),
          databaseReachable: () => this.databaseReachable(),
          targetHealth: async () => (await this.snapshot?.balancers.targetHealth()) ?? [],
        },
        entities: (name) => kept.get(name),
      });
      this.runtimes.set(definition.name, runtime);
      await kept.load();
    }
  }

  /**
   * Configures every plugin with `config`, then swaps it in. When a plugin refuses it, the plugins
   * already configured and the consumers go back to the current config, and the error is thrown.
   */
  private async apply(config: GatewayConfig): Promise<void> {
    const current = this.snapshot?.config;
    await keepTimestampsOrLog(config.unstamped, this.store.namespace('core'), this.log);
    try {
      await this.configure(config);
    } catch (err) {
      if (current) await this.configure(current);
      throw err;
    }
  }

  private async configure(config: GatewayConfig): Promise<void> {
    await this.claimSoleNode(config);
    const snapshot = new Snapshot(config, this.registry, this.runtimes, this.log, this.snapshot);
    this.consumers.setDeclared(config.consumers);
    try {
      for (const [name, runtime] of this.runtimes) {
        const view: ConfigView = {
          config,
          instances: config.plugins.filter((p) => p.name === name && p.enabled),
          entities: (entity) => config.entities[entity] ?? [],
          routeById: (id) => snapshot.routesById.get(id),
          serviceById: (id) => snapshot.servicesById.get(id),
          instanceOn: (routeId) => snapshot.plugins.steps(routeId).find((step) => step.name === name)?.anonymous,
        };
        this.keptEntities.get(name)!.setDeclared(config);
        await runtime.configure?.(view);
      }
    } catch (err) {
      snapshot.balancers.stop();
      throw err;
    }
    // Requests in flight keep the previous balancers; only their health probes stop.
    this.snapshot?.balancers.stop();
    this.snapshot = snapshot;
    this.metrics.keepRoutes(config.routes);
    snapshot.balancers.start();
    for (const warning of config.warnings) this.log.warn({ warning }, 'configuration accepted with a warning');
    this.accessLog.enabled = config.gateway.access_log;
    this.log.level = this.logLevelOverride ?? config.gateway.log_level;
  }

  private async openListeners(config: GatewayConfig): Promise<void> {
    const { gateway } = config;
    const proxySpecs = parseListenList(gateway.proxy_listen).specs;
    const adminSpecs = parseListenList(gateway.admin_listen).specs;
    const needsTls = [...proxySpecs, ...adminSpecs].some((s) => s.ssl);
    const tls = needsTls ? await loadTlsMaterial(gateway.ssl_cert, gateway.ssl_cert_key, gateway.data_dir) : undefined;
    const limits = { maxHeaderSize: gateway.max_header_size, clientTimeout: gateway.client_timeout };
    const events = {
      opened: () => {
        this.metrics.connectionsActive++;
        this.metrics.connectionsAccepted++;
      },
      closed: () => {
        this.metrics.connectionsActive--;
      },
      failed: (err: unknown) => this.log.error({ err }, 'request failed'),
    };
    // The proxy's TLS listeners present the configured certificates by server name (reloaded with the config).
    const proxyTls = tls && { ...tls, certificateFor: (servername: string) => this.snapshot.certificates.contextFor(servername) };
    for (const spec of proxySpecs) {
      const info: ListenerInfo = { port: spec.port, scheme: spec.ssl ? 'https' : 'http' };
      const listener = await this.listen(spec, proxyTls, {
        request: (req, res) => this.lifecycle.handle(req, res, info),
        upgrade: (req, socket, head) => this.lifecycle.handleUpgrade(req, socket, head, info),
      }, limits, events);
      info.port = listener.port;
      this.proxyListeners.push(listener);
    }
    const adminRoutes: AdminRoute[] = [
      ...this.pluginAdminRoutes(),
      ...coreAdminRoutes(this.adminState()),
      ...upstreamAdminRoutes({
        config: () => this.snapshot.config,
        balancers: () => this.snapshot.balancers,
        nodeId: this.nodeId,
        setTargetHealth: (upstream, target, healthy) => this.setTargetHealth(upstream, target, healthy),
      }),
      ...certificateAdminRoutes(() => this.snapshot.config),
      ...schemaAdminRoutes(this.registry),
      ...this.entityWriter().routes(),
    ];
    adminRoutes.push(...discoveryAdminRoutes(() => adminRoutes));
    const admin = new AdminRouter(adminRoutes, this.log.child({ component: 'admin' }));
    for (const spec of adminSpecs) {
      const facts: AdminListenerFacts = { scheme: spec.ssl ? 'https' : 'http', loopback: isLoopbackName(spec.host) };
      if (!facts.loopback) this.log.warn({ listen: spec.text }, 'the admin API listens beyond loopback: anyone who reaches it can manage the gateway');
      const listener = await this.listen(
        spec,
        tls,
        { request: (req, res) => void admin.handle(req as IncomingMessage, res as ServerResponse, facts) },
        limits,
        events,
      );
      this.adminListeners.push(listener);
    }
  }

  private async listen(...args: Parameters<typeof Listener.open>): Promise<Listener> {
    try {
      return await Listener.open(...args);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code === 'EADDRINUSE') throw new StartupError(`cannot listen on ${args[0].text}: the address is already in use`);
      if (e.code === 'EACCES') throw new StartupError(`cannot listen on ${args[0].text}: permission denied`);
      // E.g. EADDRNOTAVAIL (an address this host does not have) or ENOTFOUND (an unknown host name).
      if (e.code) throw new StartupError(`cannot listen on ${args[0].text}: ${e.message}`);
      throw err;
    }
  }

  private pluginAdminRoutes(): AdminRoute[] {
    return [...this.runtimes].flatMap(([name, runtime]) => [...this.keptEntities.get(name)!.adminRoutes(runtime), ...(runtime.adminRoutes ?? [])]);
  }

  private adminState() {
    return {
      snapshot: () => this.snapshot,
      consumers: this.consumers,
      metrics: this.metrics,
      registry: this.registry,
      nodeId: this.nodeId,
      processes: () => this.processes(),
      ready: () => !this.draining,
      databaseReachable: () => this.databaseReachable(),
    };
  }

  /** Whether the store's database answers, within a bound (a hung database must not hang /status). */
  private databaseReachable(): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), REACHABLE_TIMEOUT_MS)));
    return Promise.race([this.store.reachable().catch(() => false), timeout]).finally(() => clearTimeout(timer));
  }

  /** One line per listener, as printed at start: `proxy listening on URL (listen string)`. */
  listenerLines(): string[] {
    return [
      ...this.proxyListeners.map((l) => `proxy listening on ${l.url} (${l.spec.text})`),
      ...this.adminListeners.map((l) => `admin listening on ${l.url} (${l.spec.text})`),
    ];
  }

  get config(): GatewayConfig {
    return this.snapshot.config;
  }

  /** Re-reads the file; an invalid one is logged and ignored. Listener changes need a restart. */
  reload(): Promise<{ ok: true } | { ok: false; errors: ConfigError[] }> {
    const next = this.reloading.then(() => this.reloadNow());
    this.reloading = next.catch(() => undefined);
    return next;
  }

  private async reloadNow(): Promise<{ ok: true } | { ok: false; errors: ConfigError[] }> {
    const read = await this.stored.read();
    const loaded = await loadConfigFile(this.configFile, this.registry, read.document.version === 0 ? undefined : read.document);
    if (!loaded.ok) {
      logRefusedConfiguration(this.log, loaded.errors);
      return loaded;
    }
    this.refuseOneProcessConfig(loaded.config);
    const before = this.snapshot.config.gateway;
    const after = loaded.config.gateway;
    const changed = RESTART_SETTINGS.filter((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]));
    if (changed.length > 0) {
      this.log.warn({ settings: changed }, 'these gateway settings take effect at the next restart');
    }
    await this.apply(loaded.config);
    this.applied = read.document;
    this.log.info({ hash: loaded.config.hash }, 'configuration reloaded');
    return { ok: true };
  }

  /** Stops accepting, lets in-flight requests finish (bounded), flushes plugins, closes the store. */
  stop(): Promise<void> {
    return (this.stopping ??= this.shutdown());
  }

  private async shutdown(): Promise<void> {
    this.draining = true;
    clearInterval(this.sweeper);
    clearInterval(this.storedPoller);
    const listeners = [...this.proxyListeners, ...this.adminListeners];
    const closed = Promise.all(listeners.map((l) => l.stopAccepting()));
    const deadline = Date.now() + (this.snapshot?.config.gateway.shutdown_timeout ?? 0);
    while (Date.now() < deadline && listeners.some((l) => l.openConnections > 0)) {
      for (const l of listeners) l.closeIdle();
      await new Promise((r) => setTimeout(r, 25));
    }
    for (const l of listeners) l.destroyAll();
    await closed;
    // In reverse order of creation: a plugin created after another may use its service until it closes
    // (request metering hands its last events to metering's writer).
    for (const [name, runtime] of [...this.runtimes].reverse()) {
      try {
        await runtime.close?.();
      } catch (err) {
        this.log.error({ err }, 'plugin failed to close');
      }
      this.keptEntities.get(name)!.close();
    }
    this.snapshot?.balancers.stop();
    this.engine.close();
    this.protocols.close();
    await this.soleNode?.release();
    await this.store.close();
    this.accessLog.flush();
    this.log.flush();
  }

  private async sweep(): Promise<void> {
    try {
      await this.store.sweepExpired();
    } catch (err) {
      this.log.error({ err }, 'store sweep failed');
    }
  }
}

export async function usableDataDir(dataDir: string, log: Logger): Promise<void> {
  try {
    const refused = await preparePrivateDir(dataDir);
    if (refused.length > 0) log.warn({ paths: refused.slice(0, 10), count: refused.length }, 'cannot make these data files private to the gateway user (not owned by it?)');
    await access(dataDir, constants.R_OK | constants.W_OK);
  } catch (err) {
    throw new StartupError(`the data directory ${dataDir} is not usable: ${(err as Error).message}`);
  }
}

/** A store failure while starting is the operator's to fix: reported as a StartupError with its message. */
export async function startupStep<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof StoreError) throw new StartupError(err.message, { cause: err });
    if ((err as { code?: string }).code !== undefined && !(err instanceof StartupError)) throw new StartupError(`the database refused: ${(err as Error).message}`);
    throw err;
  }
}
