/** The validated, defaulted, id-resolved configuration the gateway runs on. */
import type { nodeSettingsSchema } from './entities.ts';
import type { Infer } from './schema.ts';

export type RouteProtocol = 'http' | 'https' | 'grpc' | 'grpcs' | 'ws' | 'wss';
export type ServiceProtocol = 'http' | 'https' | 'grpc' | 'grpcs' | 'ws' | 'wss';

export interface Service {
  id: string;
  name: string | null;
  protocol: ServiceProtocol;
  host: string;
  port: number;
  path: string | null;
  retries: number;
  connect_timeout: number;
  write_timeout: number;
  read_timeout: number;
  tls_verify: boolean | null;
  /** Most intermediate certificates allowed between the upstream's certificate and a trusted one. */
  tls_verify_depth: number | null;
  /** Ids of the `ca_certificates` the upstream's certificate is verified against (instead of the system's). */
  ca_certificates: string[] | null;
  /** The certificate presented to the upstream (mTLS). */
  client_certificate: { id: string } | null;
  enabled: boolean;
  tags: string[] | null;
}

/** Stream protocols: accepted in a file exported from Kong, not proxied (logged at load). */
export type StreamProtocol = 'tcp' | 'tls' | 'udp' | 'tls_passthrough';

export interface Route {
  id: string;
  name: string | null;
  protocols: RouteProtocol[];
  methods: string[] | null;
  hosts: string[] | null;
  paths: string[] | null;
  headers: Record<string, string[]> | null;
  snis: string[] | null;
  strip_path: boolean;
  preserve_host: boolean;
  regex_priority: number;
  path_handling: 'v0' | 'v1';
  https_redirect_status_code: 426 | 301 | 302 | 307 | 308;
  request_buffering: boolean;
  response_buffering: boolean;
  /** The service id, or null for a route that only plugins answer. */
  service: { id: string } | null;
  tags: string[] | null;
  /** Unix seconds: the file's, else when the file was written (config/load.ts). */
  created_at: number;
  updated_at: number;
}

export interface Consumer {
  id: string;
  username: string | null;
  custom_id: string | null;
  tags: string[] | null;
  created_at: number;
  updated_at: number;
}

export interface PluginEntity<Config = Record<string, any>> {
  id: string;
  name: string;
  instance_name: string | null;
  enabled: boolean;
  protocols: RouteProtocol[];
  config: Config;
  route: { id: string } | null;
  service: { id: string } | null;
  consumer: { id: string } | null;
  tags: string[] | null;
}

/** A validated record as the loader keeps it: an optional field the file left out reads as null, as in Kong's admin API. */
type AbsentAsNull<T> = { [K in keyof T]-?: undefined extends T[K] ? Exclude<T[K], undefined> | null : T[K] };

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
  plugins: PluginEntity[];
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
