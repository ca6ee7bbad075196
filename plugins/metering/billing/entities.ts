/**
 * The `customers`, `features` and `plans` entities of gateway.yaml, validated by the same checks (and
 * so with the same messages) as the API bodies. Declared entities are synced into the store on start
 * and reload (declared.ts) and are read-only through the API.
 */
import type { EntityDefinition, Issue, RecordSchema } from '../../../src/pdk/index.ts';
import type { InvalidParameter } from '../shared/errors.ts';
import { parseCollectionPeriod } from './shared/calendar.ts';
import { validateCustomer } from './customer/port.ts';
import { parsePlan, validateFeature } from './productcatalog/port.ts';

/** `a.b[2].c` -> ['a', 'b', 2, 'c'], so the loader can point at the line. */
function pathOf(field: string): (string | number)[] {
  return field === '' ? [] : field.split(/\.|(?=\[)/).map((p) => (p.startsWith('[') ? Number(p.slice(1, -1)) : p));
}

function asIssues(problems: InvalidParameter[]): Issue[] {
  return problems.map((p) => ({ path: pathOf(p.field), message: p.reason }));
}

function schemaOf(fields: string[], check: (entity: Record<string, unknown>) => InvalidParameter[]): RecordSchema {
  return {
    type: 'record',
    fields: Object.fromEntries(fields.map((f) => [f, { type: 'any' as const }])),
    entity_checks: [(entity) => asIssues(check(entity))],
  };
}

export const customerEntity: EntityDefinition = {
  name: 'customers',
  endpointKey: 'key',
  schema: schemaOf(['key', 'name', 'description', 'labels', 'usage_attribution', 'currency', 'primary_email'], (e) => validateCustomer(e).problems),
};

export const featureEntity: EntityDefinition = {
  name: 'features',
  endpointKey: 'key',
  schema: schemaOf(['key', 'name', 'description', 'labels', 'meter'], (e) => validateFeature(e).problems),
};

export const planEntity: EntityDefinition = {
  name: 'plans',
  endpointKey: 'key',
  schema: schemaOf(['key', 'name', 'description', 'labels', 'currency', 'billing_cadence', 'pro_rating_enabled', 'phases'], (e) => parsePlan(e).problems),
};

export const billingEntities = [customerEntity, featureEntity, planEntity];

/** The check of `config.billing.collection_period`. */
export function collectionPeriodProblem(value: string): string | undefined {
  return parseCollectionPeriod(value) === undefined ? 'expected an ISO 8601 duration without years or months, from PT0S to 31 days (e.g. PT1H)' : undefined;
}
