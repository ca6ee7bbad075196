/**
 * The plugin types: what a plugin module default-exports (PluginDefinition), what the core gives it
 * (PluginApi), and the context each phase of a request hands it. Types only: the toolkit, the consumers
 * and the core import their plugin types from here, so that nothing here imports them back.
 *
 * Request lifecycle (named phases, as Kong's): route match → protocol checks → `access` of every
 * applicable plugin in descending priority (any may answer the request itself) → upstream →
 * `response` (headers from upstream, before they go downstream) → `log` after the response ends.
 * Each phase gets a context with only what that phase may do (Kong's PDK checks phases at run time;
 * here a call in the wrong phase does not compile).
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { Issue, RecordSchema } from '../config/schema.ts';
import type { Consumer, GatewayConfig, PluginInstance, Route, Service } from '../config/types.ts';
import type { Store } from '../store/store.ts';
import type { StoreProcedure } from '../store/procedures.ts';
import type { NodeExchange } from '../process/exchange.ts';

export type { FieldSchema, Infer, Issue, RecordSchema } from '../config/schema.ts';
export type { ConsumerChild } from '../config/entities.ts';
export type { Consumer, GatewayConfig, PluginEntity, PluginInstance, Route, RouteProtocol, Service } from '../config/types.ts';
export type { BatchOp, Expectation, Journal, JournalEntry, Notices, Store, WriteBatch } from '../store/store.ts';
export type { ProcedureHost, StoreProcedure } from '../store/procedures.ts';
export type { NodeExchange, QuotaRequest, QuotaReservation } from '../process/exchange.ts';

export interface PluginDefinition<Config = any, Prepared = unknown> {
  name: string;
  version: string;
  /** Higher runs first (Kong: oauth2 1400). */
  priority: number;
  /** Schema of the plugin's `config`; defaults are filled in before the plugin sees it. */
  configSchema: RecordSchema;
  /** Checks over the defaulted config and its scope (Kong's entity checks); paths relative to `config`. */
  checkConfig?(config: Config, scope: PluginScope): Issue[];
  /** What the hooks need of an instance's config, made once per configuration: see "prepare" below. */
  prepare?(config: Config): Prepared;
  /** Authentication plugins cannot be scoped to a consumer (Kong's `no_consumer`). */
  noConsumer?: boolean;
  /** Identifies the caller (sets `ctx.consumer` / `ctx.credential` or refuses): what plugins that need an authenticated caller look for. */
  authenticates?: boolean;
  /** Entities this plugin adds to gateway.yaml (e.g. `oauth2_credentials`, `meters`). */
  entities?: EntityDefinition[];
  /**
   * The plugin's state stays correct when several processes and nodes share the store (caches kept
   * fresh by notices, single-use values taken with commitIf). Without it the plugin refuses
   * `worker_processes` above 1, and with PostgreSQL a second node on the same database.
   */
  multiProcess?: boolean;
  /**
   * Plugins whose services this one calls (`api.services.get`): where it is in use, so are they, and it
   * runs on several processes only when they do too.
   */
  uses?: string[];
  /**
   * Reads run where the store's data is (Store.nearData, src/store/procedures.ts), callable as
   * `<plugin name>.<key>`: on a node of workers, in the primary, which owns the embedded store.
   */
  storeProcedures?: Record<string, StoreProcedure>;
  /**
   * Tabs the plugin adds to the operators' console (docs/console.md), after the core's Traffic and
   * Consumers, in this order; the page shows and starts them only where the plugin is in use.
   */
  console?: { tabs: ConsoleTab[] };
  /** Builds the plugin's runtime once per gateway process. */
  create(api: PluginApi): PluginRuntime<Config, Prepared> | Promise<PluginRuntime<Config, Prepared>>;
}

/**
 * A console tab: a section of the page and its link. Both files are the plugin's own, named from
 * PACKAGE_ROOT (not import.meta, which is the bundle's where the gateway runs bundled); they are read
 * once when the admin API starts.
 */
export interface ConsoleTab {
  /** The section's id, its link's anchor (`#usage`): lowercase letters, digits and dashes. */
  id: string;
  /** The link's text. */
  title: string;
  /**
   * The section's static HTML (headings, forms, empty boxes), placed in the page as it is: never data,
   * which the script writes as text.
   */
  markup: string;
  /**
   * A JavaScript module whose default export starts the tab: `start(section)`. Served at
   * `/console/<build>/plugins/<plugin>/<file name>`, so it imports the console's helpers as
   * `../../api.js`, `../../dom.js`, `../../chart.js`.
   */
  script: string;
}

/** The plugins a gateway knows, by name. */
export type PluginRegistry = ReadonlyMap<string, PluginDefinition>;

export interface PluginScope {
  route: Route | null;
  service: Service | null;
  consumer: Consumer | null;
  /**
   * The routes this instance runs on, each with the plugins that run before it there for the same caller,
   * from the very index the request pipeline uses (Kong's precedence: route and service together mean that
   * route of that service only).
   */
  runsOn: { route: Route; before: PluginDefinition[] }[];
}

export interface EntityDefinition {
  /** The top-level key in gateway.yaml (Kong's entity name, e.g. `keyauth_credentials`). */
  name: string;
  schema: RecordSchema;
  /** May also be nested inside this core entity's records; the foreign key `field` is filled in. */
  parent?: { entity: 'consumers' | 'services' | 'routes'; field: string; required?: boolean };
  /** Field naming the entity: unique, the source of its deterministic id, and the admin API's key besides the id. */
  endpointKey?: string;
  /** Other fields no two entities share (Kong's `unique = true`); the endpoint key is unique anyway. */
  unique?: string[];
  /** A field unique among one parent's children, by which nested admin URLs also name a child (acls' `group`). */
  uniqueInParent?: string;
  /**
   * Fields kept only as their SHA-256 digest (bearer secrets such as API keys): looked up by digest, shown
   * by the admin API only in the answer to the write that set them.
   */
  digested?: string[];
  /** Fields a partial update (PATCH) must give all or none of: a transformation needs them together. */
  allOrNone?: string[];
  /** Kong's `ttl = true`: the admin API accepts `ttl` (seconds) and the entity expires after it. */
  ttl?: boolean;
  /**
   * The admin API's names (Kong's `admin_api_name`, `admin_api_nested_name`); no admin API without them.
   * `expandParentOnLookup`: `GET /<name>?<endpoint key>=<value>` shows the match's parent whole (the
   * question an authorization page asks: which application and which developer is this client_id?).
   */
  admin?: { name: string; nested?: string; expandParentOnLookup?: boolean };
  /**
   * The core keeps this entity (Kong's DAO, generated from `daos.lua`); see "Entities kept by the core" below.
   * Without it the entity lives in gateway.yaml only and the plugin reads it in `configure` (`view.entities`).
   */
  keptByCore?: boolean;
  /** Where the core keeps the runtime records of a `keptByCore` entity in the plugin's store (default `<name>/`). */
  keyPrefix?: string;
  /**
   * Kong's transformations on write (e.g. hash a secret), synchronous, for entities of gateway.yaml (skipped
   * when the file says `_transform: false`, as Kong's exports do: their values are transformed already).
   */
  transform?(entity: Record<string, any>): Record<string, any>;
}

/** What the core gives a plugin when it is created. */
export interface PluginApi {
  /** The plugin's own namespace of the store. */
  store: Store;
  log: Logger;
  /** Consumers: those of gateway.yaml and those created at runtime. */
  consumers: ConsumerDirectory;
  /** The gateway's data directory (absolute). */
  dataDir: string;
  /** This node's id, the same across restarts on one data directory (Kong's `kong.node.get_id()`). */
  nodeId: string;
  /**
   * How many gateway processes serve this node (`worker_processes`; 1 when this process is alone). State
   * meant to be shared by a node's processes (Kong's per-node shared dicts) goes through the store when above 1.
   */
  processesOnNode: number;
  /**
   * Whether other processes write the same store too (this process is a worker of several, or the store
   * is PostgreSQL, where other nodes may run): state kept in memory is then no longer the only truth.
   */
  sharedStore: boolean;
  /**
   * Whether other nodes may use the same store (PostgreSQL): state that must hold across the cluster, not
   * just this node, lives in the store.
   */
  nodesShareStore: boolean;
  /** What plugins offer each other (e.g. metering's ingest to a request-metering plugin). */
  services: PluginServices;
  /** Metrics the plugin shows on the admin API's `GET /metrics`. */
  metrics: PluginMetrics;
  /**
   * What the processes of this node share (Kong's shared dictionaries): offer a value under a topic,
   * gather every process's; counters that are the node's (`admit`). One process alone keeps its own.
   */
  node: NodeExchange;
  /** The node's own figures and its upstreams' health. */
  status: NodeStatus;
  /**
   * A `keptByCore` entity this plugin declares (e.g. `api.entities<KeyCredential>('keyauth_credentials')`);
   * throws for any other name.
   */
  entities<T extends Entity = Entity>(name: string): KeptEntities<T>;
}

/** What the node reports of itself (Kong's /status and upstream health): for the exporters of node-level series. */
export interface NodeStatus {
  /** The node's downstream connections and started requests, every process's summed. */
  server(): Promise<{ active: number; accepted: number; totalRequests: number }>;
  /** Whether the store's database answers, within a bound. */
  databaseReachable(): Promise<boolean>;
  /** Every address of every target of every upstream with its health, as the balancers of this process see it. */
  targetHealth(): Promise<TargetHealthReport[]>;
}

/** Kong's health of a target's address (`GET /upstreams/{upstream}/health`). */
export type TargetHealthState = 'HEALTHY' | 'UNHEALTHY' | 'HEALTHCHECKS_OFF';

export interface TargetHealthReport {
  /** The upstream's name. */
  upstream: string;
  /** The target as configured (`host:port`). */
  target: string;
  /** One address of the target (`ip:port`); '' when its name does not resolve. */
  address: string;
  health: TargetHealthState | 'DNS_ERROR';
}

/**
 * Prometheus metrics of a plugin, registered once in `create`; a scrape of any process reports the node's
 * figures (each process's summed, gauges as their `aggregate` says). Names start with `tollgate_` (e.g.
 * `tollgate_metering_queue_events`). Meant for per-batch or per-scrape figures: per-request series
 * are the core's (route, service, consumer, status).
 */
export interface PluginMetrics {
  counter(spec: MetricSpec): CounterMetric;
  /** With `read`, the gauge is read when /metrics is scraped (queue depths, sizes, progress). */
  gauge(spec: GaugeSpec): GaugeMetric;
  histogram(spec: HistogramSpec): HistogramMetric;
  /**
   * Series the plugin keeps itself, rendered as Prometheus text when /metrics is scraped: for per-request
   * series under a name family of their own (Kong's `kong_*`), which a registered metric would cost a
   * label hash per observation. Every name `render` writes starts with `prefix`, which is not `tollgate_`.
   */
  exposition(prefix: string, render: () => string | Promise<string>): void;
}

export interface MetricSpec {
  name: string;
  help: string;
  labelNames?: readonly string[];
}

export type MetricLabels = Record<string, string | number>;

export interface GaugeSpec extends MetricSpec {
  read?(): { labels?: MetricLabels; value: number }[];
  /**
   * How the values of the node's processes combine at a scrape: `sum` (default: each process holds its
   * own share, e.g. events in its memory), `max` or `min` (each process sees the same shared thing),
   * `average` (e.g. a progress ratio).
   */
  aggregate?: 'sum' | 'max' | 'min' | 'average';
}

export interface HistogramSpec extends MetricSpec {
  buckets: readonly number[];
}

export interface CounterMetric {
  inc(labels: MetricLabels, value?: number): void;
  inc(value?: number): void;
}

export interface GaugeMetric {
  set(labels: MetricLabels, value: number): void;
  set(value: number): void;
}

export interface HistogramMetric {
  observe(labels: MetricLabels, value: number): void;
  observe(value: number): void;
}

/**
 * Services plugins offer each other, by name. A plugin provides in `create`; another looks it up in
 * `configure` or later (every plugin is created before any is configured). The service's type is
 * the providing plugin's public interface, imported as a type only.
 */
export interface PluginServices {
  provide<T>(name: string, service: T): void;
  get<T>(name: string): T | undefined;
}

/** A stored entity: its id, and the fields its definition's schema gives it. */
export interface Entity {
  id: string;
  [field: string]: any;
}

/** What a child directory needs of its parent (EntityDirectory): liveness, and a place to register for the cascade. */
export interface ParentDirectory {
  readonly definition: EntityDefinition;
  byId(id: string): Entity | undefined;
  find(field: string, value: string): Entity | undefined;
  currentById(id: string): Promise<Entity | undefined>;
  currentBy(field: string, value: string): Promise<Entity | undefined>;
  adopt(child: ChildDirectory): void;
}

/** What a parent directory asks of its children's: deleting the children of a deleted parent (Kong's cascade). */
export interface ChildDirectory {
  /** Deletes the runtime children of a parent this process is deleting, before the parent goes. */
  removeChildrenOf(parentId: string): Promise<void>;
  /** Deletes the children this process knows of a parent another process deleted. */
  removeOrphansOf(parentId: string): Promise<void>;
}

/**
 * Consumers by id or by username, never both in one lookup: an id stored in an entity (a credential's
 * consumer) is resolved with `byId` only. For a reference a client or an operator gives (an admin URL,
 * `anonymous`), `consumerByReference` applies Kong's rule: UUID-shaped is an id, anything else a username.
 * It is the parent a plugin's credential directory names, so that deleting a consumer deletes them.
 */
export interface ConsumerDirectory extends ParentDirectory {
  byId(id: string): Consumer | undefined;
  byUsername(username: string): Consumer | undefined;
  list(): Consumer[];
}

export interface PluginRuntime<Config = any, Prepared = unknown> {
  /** Called with each configuration before it serves (at start and on every reload). */
  configure?(view: ConfigView<Config, Prepared>): void | Promise<void>;
  access?(ctx: AccessContext, config: Config, plugin: PluginInstance<Config, Prepared>): void | Promise<void>;
  /**
   * Kong's header_filter: the head of every answer to a request this plugin applies to, before it goes
   * downstream: the upstream's, or the gateway's own (a plugin's answer, an upstream failure). It runs
   * even when an earlier plugin answered and this plugin's `access` never ran, as Kong's does.
   */
  response?(ctx: ResponseContext, config: Config, response: ResponseHead, plugin: PluginInstance<Config, Prepared>): void;
  /** After the response is finished (or the client went away). Must not throw. Runs in the same cases as `response`. */
  log?(ctx: LogContext, config: Config, plugin: PluginInstance<Config, Prepared>): void;
  /**
   * Requests that matched no route (e.g. RFC 8414's `/.well-known/...<route prefix>` documents).
   * Return true when answered; the core answers 404 otherwise.
   */
  unmatched?(req: UnmatchedRequest): boolean;
  /** Routes on the admin API, e.g. `GET /oauth2/:id` (those of `keptByCore` entities are the core's). */
  adminRoutes?: AdminRoute[];
  /**
   * Kong's transformations of an admin write that need the runtime (a PBKDF2 hash on the worker pool), by
   * `keptByCore` entity name: run after validation, before the record is stored.
   */
  beforeEntitySave?: Record<string, BeforeEntitySave<any>>;
  /** Flush and release everything; the store closes after this resolves. */
  close?(): Promise<void>;
}

export interface ConfigView<Config = any, Prepared = unknown> {
  config: GatewayConfig;
  /** The enabled instances of this plugin. */
  instances: PluginInstance<Config, Prepared>[];
  /** Entities this plugin declared, as loaded from the file (`keptByCore` ones are in their directory already). */
  entities(name: string): Record<string, any>[];
  routeById(id: string): Route | undefined;
  serviceById(id: string): Service | undefined;
  /**
   * The instance of this plugin that runs on a route's requests before any consumer is known: the
   * answer the request path itself gives (Kong's precedence), so a check can never disagree with it.
   */
  instanceOn(routeId: string): PluginInstance<Config, Prepared> | undefined;
}

export interface AuthenticatedCredential {
  id: string;
  /** What the upstream learns it by (X-Credential-Identifier): Kong's key-auth sends the id, basic-auth the username, jwt the key, oauth2 the client_id. */
  identifier: string;
  /** Scopes granted to the token, when the authentication scheme has scopes. */
  scopes?: string[];
  authenticatedUserid?: string | null;
}

export interface UnmatchedRequest {
  readonly method: string;
  readonly path: string;
  readonly rawQuery: string;
  readonly headers: IncomingHttpHeaders;
  /** The host the client addressed, without port, in the form routes compare it: lowercase, no trailing dot (nginx's `$host`). */
  readonly host: string;
  /** Host with port as the client addressed it: Host, `:authority` on h2, or an absolute-form target's authority. */
  readonly rawHost: string;
  readonly scheme: 'http' | 'https';
  readonly forwardedProto: string;
  /** As AccessContext.respond: gRPC-shaped for a gRPC call. */
  respond(status: number, body?: string | Buffer | object, headers?: Record<string, string | string[]>): void;
}

/** What became of a request, for the log phase (the part of Kong's `kong.log.serialize()` plugins read). */
export interface RequestOutcome {
  /** The status sent downstream; 499 when the client went away first. */
  status: number;
  /**
   * The upstream answered and its answer went downstream (whatever its status): the request was served. False
   * for the gateway's own answers (a plugin's refusal, an upstream that could not be reached, the client gone first).
   */
  answeredByUpstream: boolean;
  source: ResponseSource;
  /** Milliseconds: the whole request, the gateway's own part (until the upstream request or the gateway's answer), the upstream's first byte. */
  latencies: { request: number; kong: number; upstream: number | undefined };
  /** The upstream's status, once the upstream answered (a WebSocket tunnel: 101). */
  upstreamStatus: number | undefined;
  /** Body bytes received from the client and sent to it (a WebSocket tunnel: the bytes through it each way). */
  requestBytes: number;
  responseBytes: number;
  /** The whole answer went downstream: false when it was cut short (the upstream failed mid-body, the client went away). */
  complete: boolean;
}

/** Header fields as Kong's serializer shows them: lowercase names, repeated ones as arrays. */
export type SerializedHeaders = Record<string, string | string[]>;

/** The request as Kong's serializer describes it (HTTP subsystem). */
export interface SerializedRequest {
  request: {
    id: string;
    uri: string;
    url: string;
    querystring: Record<string, string | boolean | (string | boolean)[]>;
    method: string;
    headers: SerializedHeaders;
    size: number;
    tls?: { version: string; cipher: string; client_verify: string };
  };
  upstream_uri: string;
  upstream_status: string;
  response: { status: number; headers: SerializedHeaders; size: number };
  latencies: { kong: number; proxy: number; request: number; receive: number };
  tries?: UpstreamTry[];
  authenticated_entity?: { id: string; consumer_id: string | undefined };
  route: Route;
  service?: Service;
  consumer?: Consumer;
  client_ip: string;
  started_at: number;
  source: 'upstream' | 'kong';
  workspace_name: string;
  [field: string]: unknown;
}

/** One try, in Kong's field names: `state` and `code` only on a try that failed. */
export interface UpstreamTry {
  ip: string;
  port: number;
  /** When the peer was chosen (ms since the epoch). */
  balancer_start: number;
  /** Milliseconds the balancer took to choose it. */
  balancer_latency: number;
  state?: 'failed';
  code?: number;
}

/** Who produced an answer (Kong's `kong.response.get_source()`). */
export type ResponseSource = 'service' | 'exit' | 'error';

export interface ResponseHead {
  status: number;
  /** The headers about to be sent downstream (lowercase names); mutate to change them. */
  headers: OutgoingHttpHeaders;
  /** `service`: the upstream's answer; `exit`: the gateway's own; `error`: a plugin failed unexpectedly (500). */
  source: ResponseSource;
  /**
   * Present when the body can be rewritten (an HTTP answer with a body, not gRPC, a WebSocket handshake or
   * HEAD): `rewrite` gets the whole body and returns the one to send. The body is then read whole before
   * anything goes downstream; one larger than 16 MiB (REWRITABLE_BODY_LIMIT) is sent unchanged. Content-Length is
   * set from the result.
   */
  rewriteBody?(rewrite: (body: Buffer) => Buffer): void;
  /**
   * Present with rewriteBody: `observe` sees each body chunk as the upstream sent it, as it passes,
   * without holding it back or changing it (a rewrite does not hold it back either). It must return
   * quickly and keep what it needs (bounded); one that throws is dropped for the rest of the body.
   * The log phase follows the last chunk.
   */
  observeBody?(observe: BodyObserver): void;
  /**
   * Present with rewriteBody: turns the body into another as it streams downstream, chunk by chunk
   * (an event stream translated event by event), holding back only what the transform keeps itself.
   * The answer then has no Content-Length. Observers see the transformed chunks, as the client gets
   * them; a rewrite, if any, gets the transformed body. A transform that throws cuts the answer short.
   */
  transformBody?(transform: BodyTransform): void;
}

/** Sees a response body chunk by chunk (see ResponseHead.observeBody). */
export type BodyObserver = (chunk: Buffer) => void;

/** Turns a response body into another as it streams (see ResponseHead.transformBody). */
export interface BodyTransform {
  /** What goes downstream for this chunk (empty while the transform waits for more). */
  write(chunk: Buffer): Buffer;
  /** What goes downstream once the body ended. */
  end(): Buffer;
}

/** What every phase reads of a request: what the client sent, where it was routed, who the caller is. */
export interface RequestView {
  readonly id: string;
  /** `performance.now()` when the request arrived. */
  readonly startedAt: number;
  /** The downstream connection's scheme. */
  readonly scheme: 'http' | 'https';
  /** `X-Forwarded-Proto` from a trusted peer, else `scheme`. */
  readonly forwardedProto: string;
  readonly httpVersion: '1.1' | '2';
  /** Content-Type application/grpc over HTTP/2. */
  readonly isGrpc: boolean;
  /** A WebSocket upgrade handshake. */
  readonly isUpgrade: boolean;
  readonly method: string;
  /** Normalized request path, without the query. */
  readonly path: string;
  /** Raw query string without the `?` ('' when none). */
  readonly rawQuery: string;
  readonly query: URLSearchParams;
  /** Client request headers (lowercase names). */
  readonly headers: IncomingHttpHeaders;
  /** The host the client addressed (Host, `:authority` on h2, or an absolute-form authority), without port, in the form routes compare it: lowercase, no trailing dot (nginx's `$host`). */
  readonly host: string;
  /** Host with port as the client addressed it: Host, `:authority` on h2, or an absolute-form target's authority. */
  readonly rawHost: string;
  readonly clientIp: string;
  /** The local address and port of the connection the request came on (nginx's `$server_addr`, `$server_port`). */
  readonly serverAddress: string | undefined;
  readonly serverPort: number | undefined;
  /**
   * The downstream connection, as a key only (the streams of one HTTP/2 connection share it): for what is
   * counted per connection (nginx's `$connection_requests`).
   */
  readonly connection: object;
  readonly route: Route;
  readonly service: Service | null;
  /** The part of the path that matched a prefix path of the route ('' for regex or no path). */
  readonly matchedPrefix: string;
  /** Captures of the route's regex path: "0" the whole match, "1".."n" the groups, and named groups (empty otherwise). */
  readonly uriCaptures: Readonly<Record<string, string>>;

  readonly consumer: Consumer | null;
  /** The credential that authenticated the consumer, with what it grants. */
  readonly credential: AuthenticatedCredential | null;
  /** Free-form data plugins share on this request (Kong's ngx.ctx), in every phase. */
  readonly shared: Record<string, unknown>;
}

/**
 * A value added to this request's access log line and to `serialize()`'s object (Kong's
 * `kong.log.set_serialize_value`, in every phase). In the serialized object a dotted name reaches into
 * nested objects (`\\.` is a dot within a name) and `undefined` removes a field; in the access log line
 * the line's own fields win.
 */
type SetLogValue = (name: string, value: unknown) => void;

/**
 * Runs `callback` once, after every plugin's log phase of this request has run: to settle what several
 * plugins' log phases contribute to (an entitlement's reservation and the events that pay it).
 */
type AfterLog = (callback: () => void) => void;

/**
 * The access phase (Kong's rewrite and access): the request may be read whole, its caller authenticated,
 * what goes upstream changed, or the request answered here.
 */
export interface AccessContext extends RequestView {
  consumer: Consumer | null;
  credential: AuthenticatedCredential | null;

  /**
   * Headers and query sent upstream (start as the client's). A header value holding a control character
   * (HTAB aside) or a character above U+00FF throws the client's 400 (it came from the request); a header
   * the gateway sets itself (Connection, Content-Length, Transfer-Encoding, ...) throws a 500.
   */
  setUpstreamHeader(name: string, value: string | string[]): void;
  removeUpstreamHeader(name: string): void;
  /** The query sent upstream, escaped as the path is (what a request target cannot carry, and `#`). */
  setUpstreamQuery(query: string): void;
  /** The path sent upstream instead of the routed one (Kong's `kong.service.request.set_path`); escaped as needed. */
  setUpstreamPath(path: string): void;
  /** The method sent upstream (Kong's `kong.service.request.set_method`); an uppercase token. */
  setUpstreamMethod(method: string): void;
  /**
   * Sends the request to this http(s) URL's origin and path instead of the service's (Kong's
   * `kong.service.set_target`, `service.request.set_scheme` and `set_path`); the query stays. The
   * service's timeouts, retries and TLS settings still apply.
   */
  setUpstreamUrl(url: URL): void;
  /**
   * A header of the answer sent downstream, whoever produces it (Kong's `kong.response.set_header` in the
   * access phase): it replaces the upstream's header of that name, and the response phase sees it.
   */
  setResponseHeader(name: string, value: string | string[]): void;
  readonly setLogValue: SetLogValue;
  readonly afterLog: AfterLog;

  /** Reads the whole request body (at most the gateway's limit; 413 otherwise); it is then proxied from memory. */
  readBody(): Promise<Buffer>;
  /**
   * The whole body when it has at most `limit` bytes, else undefined. A larger body is never held: one
   * declared larger is not read at all, and of an undeclared (chunked) one only the first `limit` bytes,
   * which go upstream ahead of the rest. Either way the upstream still gets the body whole and untouched.
   */
  readBodyWithin(limit: number): Promise<Buffer | undefined>;
  /** Replaces the body sent upstream (after readBody). */
  setUpstreamBody(body: Buffer): void;
  /**
   * Lowers the most bytes of body this request may carry (the gateway's client_max_body_size is the
   * most): a larger body is refused with `status` and Kong's "Request size limit exceeded" — a declared
   * one before it goes upstream, a chunked one as soon as it passes the limit while it streams there
   * (the upstream request is then dropped), one already read whole before it goes upstream.
   */
  limitRequestBody(bytes: number, status: number): void;

  /**
   * On a grpc/grpcs service, sends this (non-gRPC) request upstream as one gRPC call (Kong's grpc-gateway
   * and grpc-web): the body set with setUpstreamBody (length-prefixed messages) is POSTed to the upstream
   * path (setUpstreamPath: `/package.Service/Method`) with `te: trailers`; the upstream's whole answer
   * (at most 16 MiB of messages) goes to `transcode`, whose HTTP answer is sent downstream through the
   * response phase. The gateway's own failures (connect, timeout) are its usual errors. On a service of
   * another protocol the request is proxied as it is, with `te: trailers` too (Kong's grpc-gateway spec).
   */
  sendAsGrpc(transcode: GrpcTranscoder): void;
  /** Answers the request here; no upstream. Objects are sent as JSON. */
  respond(status: number, body?: string | Buffer | object, headers?: Record<string, string | string[]>): void;
  /** Kong's `kong.response.error`: `{"message": ...}`, or a gRPC-shaped answer to a gRPC request. */
  error(status: number, message: string, headers?: Record<string, string | string[]>): void;
  /** True once respond/error has been called. */
  readonly responded: boolean;
}

/** The upstream's whole answer to a call sent with AccessContext.sendAsGrpc. */
export interface GrpcCallAnswer {
  /** The HTTP/2 `:status`. */
  status: number;
  headers: IncomingHttpHeaders;
  /** The answer's length-prefixed messages, as they came. */
  messages: Buffer;
  /** Empty for a trailers-only answer (its grpc-status is among the headers). */
  trailers: IncomingHttpHeaders;
}

/** Turns a gRPC call's answer into the HTTP answer sent downstream. */
export type GrpcTranscoder = (answer: GrpcCallAnswer) => { status: number; headers: Record<string, string | string[]>; body: Buffer };

/**
 * The response phase (Kong's header_filter): the request as access left it; the answer itself is the
 * ResponseHead beside it. Too late to change what went upstream, to read the body or to answer.
 */
export interface ResponseContext extends RequestView {
  readonly setLogValue: SetLogValue;
}

/** The log phase, once the answer went downstream (or the client went away): what became of the request. */
export interface LogContext extends RequestView {
  readonly outcome: RequestOutcome;
  /**
   * Kong's `kong.log.serialize()`: the request, its answer, latencies, tries, route, service, consumer and
   * the values set with setLogValue, as Kong's logging plugins send them (src/pipeline/serialize.ts). A new
   * object each call, built then: a plugin may change it.
   */
  serialize(): SerializedRequest;
  readonly setLogValue: SetLogValue;
  readonly afterLog: AfterLog;
}

export type AdminMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface AdminRoute {
  method: AdminMethod;
  /** Path with `:name` parameters, e.g. `/oauth2/:id`. */
  path: string;
  handler(req: AdminRequest): AdminReply | Promise<AdminReply>;
  /**
   * On the GET that lists every entity of a kind (`/services`, `/key-auths`): Kong's name of that entity
   * (`services`, `keyauth_credentials`). `/tags` gathers the tags of the entities these listings show.
   */
  entity?: string;
}

export interface AdminRequest {
  params: Record<string, string>;
  query: URLSearchParams;
  /** Parsed JSON or form body (empty object when none). */
  body: Record<string, any>;
  /** The body came as a form: its values are strings (and arrays of them), to be read by the schema's types. */
  form?: boolean;
  headers: IncomingHttpHeaders;
  /** The client's address and port, for the log lines of writes. */
  client?: string;
}

export interface AdminReply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

// -- Entities kept by the core ---------------------------------------------------------------------------------
//
// An entity declared `keptByCore` is the core's, as Kong generates `kong.db.*` and the Admin API from a
// plugin's `daos.lua`: the gateway builds one EntityDirectory per such entity in every process (in the
// plugin's store, under `keyPrefix`, a consumer's child when its `parent` is `consumers`), loads it once
// the plugin is created (listeners a plugin registers in `create` see every removal), gives it the
// file's records before each `configure` of the plugin, mounts its generated admin API ahead of the
// plugin's own routes, and closes it after the plugin. The plugin asks `api.entities(name)` in `create`.

/** Told of each entity removed (deleted, its parent deleted, or expired), by this process or another. */
export type RemovedListener<T> = (entity: T, byThisProcess: boolean) => void | Promise<void>;

/** A kept entity as its plugin sees it (the core's EntityDirectory): lookups, runtime writes, removal listeners. */
export interface KeptEntities<T extends Entity = Entity> {
  byId(id: string): T | undefined;
  /** By the endpoint key or another unique field. */
  find(field: string, value: string): T | undefined;
  /** By the definition's `uniqueInParent` field among one parent's children. */
  findInParent(parentId: string, value: string): T | undefined;
  childrenOf(parentId: string): T[];
  list(): T[];
  parentOf(entity: T): Entity | undefined;
  /** As byId, re-reading the store when this process has not heard of the entity yet. */
  currentById(id: string): Promise<T | undefined>;
  /** As find, re-reading the store when this process has not heard of the entity yet. */
  currentBy(field: string, value: string): Promise<T | undefined>;
  /** The entity comes from gateway.yaml (read-only). */
  isDeclared(entity: T): boolean;
  /** Creates or replaces (`previous`) a runtime entity, expiring after `ttlSeconds` when given. */
  save(entity: T, previous?: T, ttlSeconds?: number): Promise<T>;
  remove(entity: T): Promise<void>;
  onRemoved(listener: RemovedListener<T>): void;
}

/**
 * Runs on an admin write after validation, before the entity is stored (e.g. hashing a password on the
 * worker pool). `given` names the fields this request set; `existing` is the entity a PUT or PATCH replaces.
 */
export type BeforeEntitySave<T extends Entity = Entity> = (
  entity: Record<string, any>,
  context: { given: ReadonlySet<string>; existing: T | undefined },
) => Record<string, any> | Promise<Record<string, any>>;

// -- prepare ---------------------------------------------------------------------------------------------
//
// `PluginDefinition.prepare(config)` turns an instance's config into what its hooks need on every request
// (compiled templates, address ranges, header texts): once per enabled instance each time a configuration
// is loaded, after its schema and `checkConfig` passed. The hooks read the result as `plugin.prepared`
// (`access(ctx, config, plugin)`, and `plugin` is the last argument of `response` and `log` too), so no
// plugin keeps a cache keyed by config. A ConfigCompileError (src/errors.ts, exported by the PDK) thrown
// by `prepare` refuses the configuration, at start and on reload, with the instance's position
// (`plugins[3].config.allow[2]`), as checkConfig's issues do. Caches keyed by something else (a
// connection, a secret) stay the plugin's.
