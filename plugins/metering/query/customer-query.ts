/**
 * Usage queries by customer (`customer_id` in `filters.dimensions` or `group_by_dimensions`, OpenMeter's
 * v3 and v1 `filterCustomerId`): the customers are read here, in the process that answers the request,
 * and handed to the query engine as a subject -> customer map, so the query itself still runs near the
 * data (service.ts) and aggregates each customer's events exactly (an average or a unique count of a
 * customer is not a sum of its subjects' rows). Billing owns the customers and implements the directory.
 */
import { CustomerNotFoundError } from '../shared/errors.ts';
import type { QueryResult } from './query.ts';
import { CUSTOMER_DIMENSION, type Filter, type MeterQuery } from './query-request.ts';
import type { MeterRecord } from '../meter/port.ts';
import type { CustomerDirectory, UsageCustomer } from '../shared/customer-directory.ts';

const usesCustomers = (query: MeterQuery) => query.groupBy.includes(CUSTOMER_DIMENSION) || query.filters[CUSTOMER_DIMENSION] !== undefined;

/**
 * The query with its customer filter resolved to ids and the subjects of the customers it reads
 * (`customerOf`), plus those customers by id (for CSV columns). A filter reads the customers it names
 * (404 when one is unknown); a grouping alone reads every live customer, and the usage of subjects no
 * customer claims forms one group without a `customer_id`.
 */
export async function attributeToCustomers(
  query: MeterQuery,
  directory: CustomerDirectory,
): Promise<{ query: MeterQuery; customers: Map<string, UsageCustomer> }> {
  const filter = query.filters[CUSTOMER_DIMENSION];
  const customers = filter ? await named(filter, directory) : await directory.live();
  const owners = new Map<string, string>();
  // A subject maps to the first customer listing it (only a deleted customer can share one with another).
  for (const c of customers) for (const subject of c.subjects) if (!owners.has(subject)) owners.set(subject, c.id);
  const filters = filter
    ? { ...query.filters, [CUSTOMER_DIMENSION]: { in: customers.map((c) => c.id) } }
    : query.filters;
  // fromEntries defines own properties, so a subject named `__proto__` is a key like any other.
  return {
    query: { ...query, filters, customerOf: Object.fromEntries(owners) },
    customers: new Map(customers.map((c) => [c.id, c])),
  };
}

/** The customers an `eq`/`in` filter names, by id or key; every unknown one is reported at once. */
async function named(filter: Filter, directory: CustomerDirectory): Promise<UsageCustomer[]> {
  const wanted = [...new Set([...(filter.eq !== undefined ? [filter.eq] : []), ...(filter.in ?? [])])];
  const found = await Promise.all(wanted.map((idOrKey) => directory.find(idOrKey)));
  const unknown = wanted.filter((_, i) => !found[i]);
  if (unknown.length > 0) throw new CustomerNotFoundError(unknown, `filters.dimensions.${CUSTOMER_DIMENSION}`);
  return found as UsageCustomer[];
}

/** What runs a meter query near the data (MeteringService): named here so that query/ needs nothing of the service. */
export interface MeterQueries {
  query(record: MeterRecord, query: MeterQuery, waitMs: number): Promise<QueryResult>;
}

/** Meter queries as the HTTP mappings run them: by customer too, the rest as the service answers them. */
export class UsageQueries {
  constructor(
    private readonly service: MeterQueries,
    private readonly directory: CustomerDirectory,
  ) {}

  /** The result, and the customers it may name (by id), for the columns a CSV adds. */
  async run(record: MeterRecord, query: MeterQuery, waitMs: number): Promise<{ result: QueryResult; customers: Map<string, UsageCustomer> }> {
    if (!usesCustomers(query)) return { result: await this.service.query(record, query, waitMs), customers: new Map() };
    const attributed = await attributeToCustomers(query, this.directory);
    return { result: await this.service.query(record, attributed.query, waitMs), customers: attributed.customers };
  }
}
