/** The validated, defaulted, id-resolved configuration the gateway runs on. */
import type { consumerSchema, nodeSettingsSchema, pluginEntitySchema, ROUTE_PROTOCOLS, routeSchema, serviceSchema, STREAM_PROTOCOLS } from './entities.ts';
import type { caCertificateSchema, certificateSchema, sniSchema } from './certificates.ts';
import type { Infer } from './schema.ts';
import type { ALGORITHMS, HASH_INPUTS, targetSchema, upstreamSchema } from './upstreams.ts';

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

/**
 * Kong's `created_at` / `updated_at` (seconds; targets to the millisecond): the file's, else those the
 * gateway keeps for the entity (src/entity-timestamps.ts).
 */
export interface Timestamped {
  created_at: number;
  updated_at: number;
}

/**
 * An entity the file gives no timestamps: it carries the load's time until the gateway gives it those it
 * keeps (`updated_at` only on the kinds that have one: Kong's credentials have `created_at` alone).
 */
export interface UnstampedEntity {
  kind: string;
  entity: { id: string; created_at: number; updated_at?: number };
}

/**
 * A service as the loader keeps it: its schema's fields, `url` expanded into protocol, host, port and
 * path, references resolved.
 */
export type Service = Omit<
  AbsentAsNull<Infer<typeof serviceSchema>>,
  'id' | 'url' | 'created_at' | 'updated_at' | 'ca_certificates' | 'client_certificate'
> &
  Identified &
  Timestamped & {
    ca_certificates: string[] | null;
    client_certificate: { id: string } | null;
  };

/**
 * A route as the loader keeps it: its schema's fields with the service resolved and header names in
 * lowercase. Stream routes are not kept, so neither are their protocols and `sources`/`destinations`;
 * `strip_path` left out is true, but for gRPC routes.
 */
export type Route = Omit<
  AbsentAsNull<Infer<ReturnType<typeof routeSchema>>>,
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
  Identified &
  Timestamped & {
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

type InferredUpstream = Infer<typeof upstreamSchema>;

export type BalancingAlgorithm = (typeof ALGORITHMS)[number];
export type HashInput = (typeof HASH_INPUTS)[number];
export type ProbeType = ActiveHealthchecks['type'];

/**
 * Active probes as the loader keeps them: `https_sni` and `headers` left out read as null. `timeout` is
 * the seconds each probe may take (connect, send, receive); an `interval` of 0 leaves healthy targets
 * unprobed, `successes` 0 never makes a target healthy.
 */
export type ActiveHealthchecks = AbsentAsNull<InferredUpstream['healthchecks']['active']>;
export type PassiveHealthchecks = InferredUpstream['healthchecks']['passive'];

/** `threshold`: the percentage of the weight that must be healthy for the upstream to take traffic. */
export type Healthchecks = Omit<InferredUpstream['healthchecks'], 'active'> & { active: ActiveHealthchecks };

/**
 * An upstream as the loader keeps it: `name` is the host a service's `host` refers
 * to, `host_header` the Host sent to the targets instead of their own names.
 */
export type Upstream = Omit<AbsentAsNull<InferredUpstream>, 'id' | 'created_at' | 'updated_at' | 'healthchecks' | 'client_certificate'> &
  Identified &
  Timestamped & {
    healthchecks: Healthchecks;
    client_certificate: { id: string } | null;
  };

/** A target: `target` is `host:port` in Kong's normal form (port 8000 when the file gave none). */
export type Target = Omit<AbsentAsNull<Infer<typeof targetSchema>>, 'id' | 'created_at' | 'updated_at' | 'upstream'> &
  Identified &
  Timestamped & { upstream: { id: string } };

/** A certificate, with the names of the SNIs served with it. */
export type Certificate = Omit<AbsentAsNull<Infer<typeof certificateSchema>>, 'id' | 'created_at' | 'updated_at'> & Identified & Timestamped & { snis: string[] };

/** An SNI: `name` is a host name, `*.example.com`, `example.*`, or `*` (every name without a better match). */
export type Sni = Omit<AbsentAsNull<Infer<typeof sniSchema>>, 'id' | 'created_at' | 'updated_at' | 'certificate'> &
  Identified &
  Timestamped & { certificate: { id: string } };

/** A CA certificate: `cert_digest` is the one the loader computed (and checked against the file's). */
export type CaCertificate = Omit<AbsentAsNull<Infer<typeof caCertificateSchema>>, 'id' | 'created_at' | 'updated_at' | 'cert_digest'> &
  Identified &
  Timestamped & { cert_digest: string };

/** A `vaults` entity (Kong OSS's `env` vault under a prefix of its own), as the admin API shows it. */
export interface VaultEntity extends Timestamped {
  id: string;
  name: string;
  prefix: string;
  description: string | null;
  config: { prefix: string | null };
  tags: string[] | null;
}

export interface GatewayConfig {
  /** Absolute path of the file it came from. */
  file: string;
  /** The file's text, from which a change made through the admin API rebuilds the configuration. */
  text: string;
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
  /** The `vaults` the file configures (`{vault://…}` references were resolved while it loaded). */
  vaults: VaultEntity[];
  /** What was accepted but is not served (stream routes of a Kong export), as FILE:LINE:COL: path: message. */
  warnings: string[];
  /** The file's timestamp-less entities, until the gateway gives them their kept timestamps. */
  unstamped: UnstampedEntity[];
  /** Entities declared by plugins (e.g. oauth2_credentials, meters), by top-level key. */
  entities: Record<string, Record<string, any>[]>;
  /**
   * Why the node runs one process although worker_processes was left at its default (`auto`): a plugin
   * in use keeps state in one process. Null when the setting is followed as written.
   */
  oneProcessBecause: string | null;
}
