/** The validated, defaulted, id-resolved configuration the gateway runs on. */

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
  enabled: boolean;
  tags: string[] | null;
}

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
  /** Declaration order, the last tie-breaker. */
  created_at: number;
}

export interface Consumer {
  id: string;
  username: string | null;
  custom_id: string | null;
  tags: string[] | null;
  created_at: number;
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

/** Node settings: the `gateway:` block (what Kong keeps in kong.conf). */
export interface NodeSettings {
  proxy_listen: string[];
  admin_listen: string[];
  ssl_cert: string | null;
  ssl_cert_key: string | null;
  data_dir: string;
  trusted_ips: string[];
  log_level: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  access_log: boolean;
  /** Largest request body the gateway accepts, in bytes (0 = no limit). */
  client_max_body_size: number;
  /** Largest total size of request headers, in bytes. */
  max_header_size: number;
  /** Idle timeout for downstream connections, ms. */
  client_timeout: number;
  /** How long SIGTERM waits for in-flight requests before closing connections, ms. */
  shutdown_timeout: number;
  upstream_keepalive_pool_size: number;
  upstream_keepalive_idle_timeout: number;
  /** The store: LevelDB under data_dir (one node), or PostgreSQL shared by every node of a cluster. */
  database: 'leveldb' | 'postgres';
  pg_host: string;
  pg_port: number;
  pg_user: string;
  pg_password: string | null;
  pg_database: string;
  pg_schema: string;
  pg_ssl: boolean;
  pg_ssl_verify: boolean;
  /** Processes serving this node: 'auto' = one per core. */
  worker_processes: number | 'auto';
  /** Seconds within which a change made by another process or node reaches this one's caches. */
  db_update_frequency: number;
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
  /** Entities declared by plugins (e.g. oauth2_credentials, meters), by top-level key. */
  entities: Record<string, Record<string, any>[]>;
}
