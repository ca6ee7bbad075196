/**
 * The StatsD lines of one request (kong/plugins/statsd/log.lua and statsd_logger.lua): each configured
 * metric under `<prefix>.service.<service>.` (or Kong's other scopes), or, with `tag_style`, under
 * `<prefix>.` with the request's tags in that style. `shdict_usage` reports nothing: Tollgate has no
 * shared dictionaries.
 */
import type { Consumer, Route, Service } from '../../src/pdk/index.ts';
import type { ConsumerIdentifier, MetricConfig, ServiceIdentifier, StatsdConfig } from './schema.ts';

/** Tollgate has the one workspace Kong OSS has; its id is fixed. */
const WORKSPACE = { workspace_id: '00000000-0000-4000-8000-000000000001', workspace_name: 'default' } as const;

const STAT_TYPES: Record<string, string> = { gauge: 'g', counter: 'c', timer: 'ms', histogram: 'h', meter: 'm', set: 's' };

/** What the lines are made of. */
export interface RequestFacts {
  status: number;
  requestSize: number;
  responseSize: number;
  latency: number;
  kongLatency: number;
  /** Undefined when nothing came from upstream (Kong's -1: not sent). */
  upstreamLatency: number | undefined;
  service: Service | null;
  route: Route;
  consumer: Consumer | null;
  /** This machine's name, dots as underscores. */
  hostname: string;
}

const consumerIds: Record<ConsumerIdentifier, (c: Consumer) => string | null | undefined> = {
  consumer_id: (c) => c.id,
  custom_id: (c) => c.custom_id,
  username: (c) => c.username,
};

const serviceIds: Record<ServiceIdentifier, (s: Service) => string | null | undefined> = {
  service_id: (s) => s.id,
  service_name: (s) => s.name,
  service_host: (s) => s.host,
  service_name_or_host: (s) => s.name ?? s.host,
};

/** Kong's simple metrics: their stat names and values. */
const SIMPLE: Partial<Record<MetricConfig['name'], [string, (f: RequestFacts) => number | undefined]>> = {
  request_count: ['request.count', () => 1],
  request_size: ['request.size', (f) => f.requestSize],
  response_size: ['response.size', (f) => f.responseSize],
  latency: ['latency', (f) => f.latency],
  upstream_latency: ['upstream_latency', (f) => f.upstreamLatency],
  kong_latency: ['kong_latency', (f) => f.kongLatency],
};

export class LineWriter {
  readonly lines: string[] = [];

  constructor(private readonly config: StatsdConfig, private readonly prefix: string) {}

  /** Kong's create_statsd_message. */
  add(stat: string, value: string | number, statType: string, sampleRate?: number | null, tags?: [string, string | number][]): void {
    const kind = STAT_TYPES[statType];
    const rate = sampleRate != null && sampleRate !== 1 ? `|@${sampleRate}` : '';
    const style = this.config.tag_style;
    const name = `${this.prefix}.${stat}`;
    if (!style || !tags) this.lines.push(`${name}:${value}|${kind}${rate}`);
    else if (style === 'dogstatsd') this.lines.push(`${name}:${value}|${kind}${rate}|#${tags.map(([k, v]) => `${k}:${v}`).join(',')}`);
    else {
      const pairs = tags.map(([k, v]) => `${k}=${v}`).join(',');
      if (style === 'influxdb') this.lines.push(`${name},${pairs}:${value}|${kind}${rate}`);
      else if (style === 'librato') this.lines.push(`${name}#${pairs}:${value}|${kind}${rate}`);
      else this.lines.push(`${name}[${pairs}]:${value}|${kind}${rate}`);
    }
  }
}

/** The lines of one request for `config`. */
export function requestLines(config: StatsdConfig, facts: RequestFacts): string[] {
  const prefix = config.hostname_in_prefix && !config.tag_style ? `${config.prefix}.node.${facts.hostname}` : config.prefix;
  const out = new LineWriter(config, prefix);
  for (const metric of config.metrics) {
    const simple = SIMPLE[metric.name];
    if (simple) {
      const [stat, valueOf] = simple;
      const value = valueOf(facts);
      if (value === undefined || value === -1) continue;
      if (config.tag_style) out.add(stat, value, metric.stat_type, metric.sample_rate, tagsOf(config, facts, metric));
      else out.add(`${scopeOf(facts, metric.service_identifier ?? config.service_identifier_default)}.${stat}`, value, metric.stat_type, metric.sample_rate);
    } else if (!config.tag_style) {
      // Kong's per-user and per-status metrics exist only without tags.
      perRequestMetric(config, facts, metric, out);
    }
  }
  return out.lines;
}

function perRequestMetric(config: StatsdConfig, facts: RequestFacts, metric: MetricConfig, out: LineWriter): void {
  const scope = scopeOf(facts, metric.service_identifier ?? config.service_identifier_default);
  const consumerId = facts.consumer ? consumerIds[metric.consumer_identifier ?? config.consumer_identifier_default](facts.consumer) : undefined;
  const { status } = facts;
  switch (metric.name) {
    case 'status_count':
      return out.add(`${scope}.status.${status}`, 1, metric.stat_type, metric.sample_rate);
    case 'status_count_per_workspace':
      return out.add(`${scope}.workspace.${WORKSPACE[metric.workspace_identifier ?? config.workspace_identifier_default]}.status.${status}`, 1, metric.stat_type, metric.sample_rate);
  }
  if (consumerId == null) return;
  switch (metric.name) {
    case 'unique_users':
      return out.add(`${scope}.user.uniques`, consumerId, metric.stat_type);
    case 'request_per_user':
      return out.add(`${scope}.user.${consumerId}.request.count`, 1, metric.stat_type, metric.sample_rate);
    case 'status_count_per_user':
      return out.add(`${scope}.user.${consumerId}.status.${status}`, 1, metric.stat_type, metric.sample_rate);
    case 'status_count_per_user_per_route':
      return out.add(`route.${facts.route.id}.user.${consumerId}.status.${status}`, 1, metric.stat_type, metric.sample_rate);
  }
}

/** Kong's get_scope_name: `service.<identifier, dots as underscores>`, or `global.unmatched` without a service. */
function scopeOf(facts: RequestFacts, identifier: ServiceIdentifier): string {
  if (!facts.service) return 'global.unmatched';
  const name = serviceIds[identifier](facts.service);
  return `service.${name == null ? 'unnamed' : name.replace(/\./g, '_')}`;
}

/** Kong's get_tags: none without a service; the consumer tag only for an identified consumer. */
function tagsOf(config: StatsdConfig, facts: RequestFacts, metric: MetricConfig): [string, string | number][] | undefined {
  const service = facts.service && serviceIds[metric.service_identifier ?? config.service_identifier_default](facts.service);
  if (service == null) return undefined;
  const tags: [string, string | number][] = [
    ['service', service],
    ['route', facts.route.name ?? facts.route.id],
    ['workspace', WORKSPACE[metric.workspace_identifier ?? config.workspace_identifier_default]],
  ];
  const consumer = facts.consumer && consumerIds[metric.consumer_identifier ?? config.consumer_identifier_default](facts.consumer);
  if (consumer != null) tags.push(['consumer', consumer]);
  tags.push(['node', facts.hostname], ['status', facts.status]);
  return tags;
}
