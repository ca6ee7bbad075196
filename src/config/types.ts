/** The validated, defaulted, id-resolved configuration the gateway runs on. */
import type { consumerSchema, nodeSettingsSchema, pluginEntitySchema, ROUTE_PROTOCOLS, routeSchema, serviceSchema, STREAM_PROTOCOLS } from './entities.ts';
import type { Infer, InferIgnoringStrayNulls } from './schema.ts';

/** Stream protocols: accepted in a file exported from Kong, not proxied (logged at load). */
export type StreamProtocol = (typeof STREAM_PROTOCOLS)[number];
/** The protocols of the routes the gateway keeps and serves. */
export type RouteProtocol = Exclude<(typeof ROUTE_PROTOCOLS)[number], StreamProtocol>;
export type ServiceProtocol = Service['protocol'];

/** A validated record as the loader keeps it: an optional field the file left out reads as null, as in Kong's admin API. */
type AbsentAsNull<T> = { [K in keyof T]-?: undefined extends T[K] ? Exclude<T[K], undefined> | null : T[K] };

/** What the loader puts in every core entity it keeps: the id given, or one derived from the entity's name. */
interface Identified {
  id: string;
}

/** The loader's timestamps: the file's, else when the file was written (config/load.ts). */
interface Timestamped {
  created_at: number;
  updated_at: number;
}

/**
 * A service as the loader keeps it: its schema's fields, `url` expanded into protocol, host, port and
 * path, references resolved, without timestamps. The proxy reads `retries` and the timeouts unguarded:
 * their stray nulls are ignored (see InferIgnoringStrayNulls), as for the route's lists.
 */
export type Service = Omit<
  AbsentAsNull<InferIgnoringStrayNulls<typeof serviceSchema>>,
  'id' | 'url' | 'created_at' | 'updated_at' | 'ca_certificates' | 'client_certificate'
> &
  Identified & {
    ca_certificates: string[] | null;
    client_certificate: { id: string } | null;
  };

/**
 * A route as the loader keeps it: its schema's fields with the service resolved and header names in
 * lowercase. Stream routes are not kept, so neither are their protocols and `sources`/`destinations`;
 * `strip_path` left out is true, but for gRPC routes.
 */
export type Route = Omit<
  AbsentAsNull<InferIgnoringStrayNulls<ReturnType<typeof routeSchema>>>,
  'id' | 'protocols' | 'sources' | 'destinations' | 'strip_path' | 'service' | 'created_at' | 'updated_at'
> &
  Identified &
  Timestamped & {
    protocols: RouteProtocol[];
    strip_path: boolean;
    service: { id: string } | null;
  };

export type Consumer = Omit<AbsentAsNull<Infer<typeof consumerSchema>>, 'id' | 'created_at' | 'updated_at'> & Identified & Timestamped;

/** A plugin instance: its schema's fields, `config` validated by the plugin's schema, its scope resolved. */
export type PluginEntity<Config = Record<string, any>> = Omit<
  AbsentAsNull<Infer<typeof pluginEntitySchema>>,
  'id' | 'created_at' | 'updated_at' | 'config' | 'route' | 'service' | 'consumer'
> &
  Identified & {
    config: Config;
    route: { id: string } | null;
    service: { id: string } | null;
    consumer: { id: string } | null;
  };

/**
 * An instance as the gateway runs it: with what its plugin's `prepare` made of `config` once, when the
 * configuration was loaded (undefined without `prepare`, and for a disabled instance). `prepared` is not
 * enumerable: the admin API and the checks see the instance as the file declares it.
 */
export type PluginInstance<Config = Record<string, any>, Prepared = unknown> = PluginEntity<Config> & { readonly prepared: Prepared };

/**
 * Node settings: the `gateway:` block as validated, with `data_dir` and the certificate paths made
 * absolute. `worker_processes` is typed here: the schema takes it as `any` (a count or 'auto') and checks it.
 */
export type NodeSettings = Omit<AbsentAsNull<Infer<typeof nodeSettingsSchema>>, 'worker_processes'> & { worker_processes: number | 'auto' };

export type BalancingAlgorithm = 'round-robin' | 'consistent-hashing' | 'least-connections' | 'latency';
export type HashInput = 'none' | 'consumer' | 'ip' | 'header' | 'cookie' | 'path' | 'query_arg' | 'uri_capture';
export type ProbeType = 'tcp' | 'http' | 'https' | 'grpc' | 'grpcs';

export interface ActiveHealthchecks {
  type: ProbeType;
  /** Seconds each probe may take (connect, send, receive). */
  timeout: number;
  concurrency: number;
  http_path: string;
  https_sni: string | null;
  https_verify_certificate: boolean;
  headers: Record<string, string[]> | null;
  /** interval 0: healthy targets are not probed; successes 0: probes never make a target healthy. */
  healthy: { interval: number; http_statuses: number[]; successes: number };
  unhealthy: { interval: number; http_statuses: number[]; tcp_failures: number; timeouts: number; http_failures: number };
}

export interface PassiveHealthchecks {
  type: ProbeType;
  healthy: { http_statuses: number[]; successes: number };
  unhealthy: { http_statuses: number[]; tcp_failures: number; timeouts: number; http_failures: number };
}

export interface Healthchecks {
  active: ActiveHealthchecks;
  passive: PassiveHealthchecks;
  /** Percentage of the weight that must be healthy for the upstream to take traffic. */
  threshold: number;
}

export interface Upstream {
  id: string;
  /** The host name a service's `host` refers to. */
  name: string;
  algorithm: BalancingAlgorithm;
  hash_on: HashInput;
  hash_fallback: HashInput;
  hash_on_header: string | null;
  hash_fallback_header: string | null;
  hash_on_cookie: string | null;
  hash_on_cookie_path: string;
  hash_on_query_arg: string | null;
  hash_fallback_query_arg: string | null;
  hash_on_uri_capture: string | null;
  hash_fallback_uri_capture: string | null;
  slots: number;
  healthchecks: Healthchecks;
  tags: string[] | null;
  /** Host header sent to the targets instead of their own names. */
  host_header: string | null;
  client_certificate: { id: string } | null;
  use_srv_name: boolean;
}

export interface Target {
  id: string;
  /** `host:port` in Kong's normal form (port 8000 when the file gave none). */
  target: string;
  weight: number;
  upstream: { id: string };
  tags: string[] | null;
}

export interface Certificate {
  id: string;
  cert: string;
  key: string;
  cert_alt: string | null;
  key_alt: string | null;
  tags: string[] | null;
  /** Names of the SNIs served with this certificate. */
  snis: string[];
}

export interface Sni {
  id: string;
  /** A host name, `*.example.com`, `example.*`, or `*` (every name without a better match). */
  name: string;
  certificate: { id: string };
  tags: string[] | null;
}

export interface CaCertificate {
  id: string;
  cert: string;
  cert_digest: string;
  tags: string[] | null;
}

export interface GatewayConfig {
  /** Absolute path of the file it came from. */
  file: string;
  /** md5 of the raw text, as Kong's configuration hash. */
  hash: string;
  gateway: NodeSettings;
  services: Service[];
  routes: Route[];
  consumers: Consumer[];
  plugins: PluginInstance[];
  upstreams: Upstream[];
  targets: Target[];
  certificates: Certificate[];
  snis: Sni[];
  ca_certificates: CaCertificate[];
  /** What was accepted but is not served (stream routes of a Kong export), as FILE:LINE:COL: path: message. */
  warnings: string[];
  /** Entities declared by plugins (e.g. oauth2_credentials, meters), by top-level key. */
  entities: Record<string, Record<string, any>[]>;
  /**
   * Why the node runs one process although worker_processes was left at its default (`auto`): a plugin
   * in use keeps state in one process. Null when the setting is followed as written.
   */
  oneProcessBecause: string | null;
}
