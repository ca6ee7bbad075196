/**
 * Features: what a plan grants or prices, optionally measured by a meter (with dimension filters, so one
 * gateway meter can feed per-route features). The key is unique among non-archived features; deleting
 * archives, and is refused while an active plan or a live subscription uses the feature.
 */
import { ulid } from '../../shared/ids.ts';
import { formatInstant } from '../shared/calendar.ts';
import { conflict, forbidden, invalid, notFound, readOnly, validationFailed } from '../shared/errors.ts';
import { description, isObject, join, labels, name, object, resourceKey, sealed, text, type Body, type Problems } from '../shared/fields.ts';
import type { Origin } from '../customer/port.ts';
import { keys, PREFIXES, type BillingStore, type Transaction } from '../shared/store.ts';
import type { DimensionFilter, UsageSource } from '../shared/usage.ts';

export interface FeatureMeter {
  id: string;
  key: string;
  filters: Record<string, DimensionFilter>;
}

export interface Feature {
  id: string;
  key: string;
  name: string;
  description: string | null;
  labels: Record<string, string>;
  meter: FeatureMeter | null;
  created_at: string;
  updated_at: string;
  archived_at: string | null;
  origin: Origin;
}

export type FeatureDefinition = Pick<Feature, 'key' | 'name' | 'description' | 'labels'> & { meter: { idOrKey: string; filters: Record<string, DimensionFilter> } | null };

/** Aggregations whose value over a period is a quantity to limit or price (OpenMeter's rule). */
const FEATURE_AGGREGATIONS = ['sum', 'count', 'unique_count', 'latest'];
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/i;
const MAX_FILTER_VALUES = 100;

/** Every problem of a feature body that needs no meter to judge. */
export function validateFeature(body: unknown): { definition?: FeatureDefinition; problems: Problems } {
  if (!isObject(body)) return { problems: [invalid('', 'request body must be a JSON object', 'type')] };
  const out: Problems = [];
  sealed(body, ['key', 'name', 'description', 'labels', 'meter'], '', out);
  const key = resourceKey(body, 'key', '', out);
  if (key && ULID.test(key)) out.push(invalid('key', 'a feature key cannot be a ULID', 'invalid'));
  const featureName = name(body, '', out);
  const desc = description(body, '', out);
  const featureLabels = labels(body, '', out);
  const meter = meterReference(body, out);
  if (out.length > 0) return { problems: out };
  return { definition: { key: key!, name: featureName!, description: desc, labels: featureLabels, meter }, problems: out };
}

function meterReference(body: Body, out: Problems): FeatureDefinition['meter'] {
  const m = object(body, 'meter', '', out);
  if (!m) return null;
  sealed(m, ['id', 'key', 'filters'], 'meter', out);
  const idOrKey = text(m, 'id', 'meter', { max: 64 }, out) ?? text(m, 'key', 'meter', { max: 64 }, out);
  if (idOrKey === undefined && m.id === undefined && m.key === undefined) out.push(invalid('meter.id', 'meter id or key is required', 'required'));
  const filters: Record<string, DimensionFilter> = {};
  const f = object(m, 'filters', 'meter', out);
  for (const [dimension, filter] of Object.entries(f ?? {})) {
    const path = join('meter.filters', dimension);
    if (!isObject(filter)) {
      out.push(invalid(path, 'must be an object with eq or in', 'type'));
      continue;
    }
    const ops = Object.keys(filter);
    if (ops.length !== 1 || !['eq', 'in'].includes(ops[0])) out.push(invalid(path, 'a filter has exactly one operator: eq or in', 'unsupported_filter_operator'));
    else if (ops[0] === 'eq' && typeof filter.eq !== 'string') out.push(invalid(join(path, 'eq'), 'must be a string', 'is_string'));
    else if (ops[0] === 'in' && (!Array.isArray(filter.in) || filter.in.length === 0 || filter.in.length > MAX_FILTER_VALUES || filter.in.some((v) => typeof v !== 'string'))) {
      out.push(invalid(join(path, 'in'), `must be an array of 1 to ${MAX_FILTER_VALUES} strings`, 'type'));
    } else filters[dimension] = ops[0] === 'eq' ? { eq: filter.eq as string } : { in: filter.in as string[] };
  }
  return idOrKey === undefined ? null : { idOrKey, filters };
}

export function publicFeature(f: Feature): Record<string, unknown> {
  const out: Record<string, unknown> = { id: f.id, key: f.key, name: f.name };
  if (f.description !== null) out.description = f.description;
  if (Object.keys(f.labels).length > 0) out.labels = f.labels;
  if (f.meter) out.meter = Object.keys(f.meter.filters).length > 0 ? f.meter : { id: f.meter.id, key: f.meter.key };
  out.created_at = f.created_at;
  out.updated_at = f.updated_at;
  if (f.archived_at) out.archived_at = f.archived_at;
  return out;
}

export class FeatureService {
  constructor(
    private readonly db: BillingStore,
    private readonly usage: UsageSource,
    /** Whether an active plan or a live subscription uses the feature (read into `tx`). */
    private readonly inUse: (tx: Transaction, feature: Feature) => Promise<string | undefined>,
  ) {}

  /** The meter a definition names, checked as OpenMeter does (404 unknown meter, 400 aggregation or filters). */
  resolveMeter(def: FeatureDefinition): FeatureMeter | null {
    if (!def.meter) return null;
    const meter = this.usage.meter(def.meter.idOrKey);
    if (!meter) throw notFound('meter', def.meter.idOrKey);
    if (!FEATURE_AGGREGATIONS.includes(meter.aggregation)) {
      throw validationFailed([invalid('meter', `meter ${meter.key} has aggregation ${meter.aggregation}: features can only be created for meters with aggregation ${FEATURE_AGGREGATIONS.join(', ')}`, 'invalid_aggregation', { code: 'invalid_aggregation' })]);
    }
    const unknown = Object.keys(def.meter.filters).filter((d) => !meter.dimensions.includes(d));
    if (unknown.length > 0) {
      throw validationFailed([invalid('meter.filters', `invalid filters for feature ${def.key}: ${unknown.join(', ')}; available columns: ${meter.dimensions.join(', ') || '(none)'}`, 'invalid_filters', { code: 'invalid_filters' })]);
    }
    return { id: meter.id, key: meter.key, filters: def.meter.filters };
  }

  /** By id (archived ones too) or by the key of a non-archived feature. */
  async find(idOrKey: string, tx?: Transaction): Promise<Feature | undefined> {
    const get = <T>(key: string) => (tx ? tx.get<T>(key) : this.db.get<T>(key));
    const byId = ULID.test(idOrKey) ? await get<Feature>(keys.feature(idOrKey)) : undefined;
    if (byId) return byId;
    const id = await get<string>(keys.featureKey(idOrKey));
    return id === undefined ? undefined : get<Feature>(keys.feature(id));
  }

  /** A non-archived feature (archived ones are gone from the API, as OpenMeter's GET). */
  async get(idOrKey: string): Promise<Feature> {
    const f = await this.find(idOrKey);
    if (!f || f.archived_at) throw notFound('feature', idOrKey);
    return f;
  }

  list(): Promise<Feature[]> {
    return this.db.list<Feature>(PREFIXES.features);
  }

  create(def: FeatureDefinition, origin: Origin = 'api', id = ulid()): Promise<Feature> {
    const meter = this.resolveMeter(def);
    return this.db.transact(async (tx) => {
      const holder = await tx.get<string>(keys.featureKey(def.key));
      if (holder !== undefined && holder !== id) throw conflict(`feature ${holder} with key ${def.key} already exists`);
      const now = formatInstant(Date.now());
      const previous = await tx.get<Feature>(keys.feature(id));
      const feature: Feature = {
        id,
        key: def.key,
        name: def.name,
        description: def.description,
        labels: def.labels,
        meter,
        created_at: previous?.created_at ?? now,
        updated_at: now,
        archived_at: null,
        origin,
      };
      tx.put(keys.feature(id), feature);
      tx.put(keys.featureKey(def.key), JSON.stringify(id));
      return feature;
    }, 'feature');
  }

  /** Archives the feature: its key becomes free; plans and subscriptions that used it keep their copy. */
  archive(idOrKey: string, origin: Origin = 'api'): Promise<void> {
    return this.db.transact(async (tx) => {
      const feature = await this.find(idOrKey, tx);
      if (!feature || feature.archived_at) throw notFound('feature', idOrKey);
      if (feature.origin !== origin) throw readOnly('feature', feature.key);
      const user = await this.inUse(tx, feature);
      if (user) throw forbidden(`feature ${feature.key} is referenced by ${user}; archive that first`);
      const now = formatInstant(Date.now());
      tx.put(keys.feature(feature.id), { ...feature, archived_at: now, updated_at: now });
      tx.del(keys.featureKey(feature.key));
    }, 'feature');
  }
}
