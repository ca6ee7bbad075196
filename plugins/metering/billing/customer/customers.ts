/**
 * Customers: who is billed, and which usage subjects are theirs. A customer's usage is the events whose
 * subject is one of its `usage_attribution.subject_keys`, or its key when that list is empty. A key is
 * unique among live customers, and a usage subject belongs to at most one live customer (index keys
 * in the store, taken in the same commit as the record). Deleting is soft, and refused while a
 * subscription is live.
 */
import type { CustomerDirectory, UsageCustomer } from '../../shared/customer-directory.ts';
import { ulid } from '../../shared/ids.ts';
import { formatInstant } from '../shared/calendar.ts';
import { conflict, gone, invalid, notFound, readOnly, ruleBroken, validationFailed } from '../shared/errors.ts';
import { array, description, isObject, labels, name, sealed, text, type Body, type Problems } from '../shared/fields.ts';
import { currencyOf } from '../shared/money.ts';
import { keys, PREFIXES, type BillingStore, type Transaction } from '../shared/store.ts';
import { liveSubscriptionOf } from './subscription-slot.ts';

export type Origin = 'api' | 'config';

export interface Customer {
  id: string;
  key: string;
  name: string;
  description: string | null;
  labels: Record<string, string>;
  usage_attribution: { subject_keys: string[] };
  currency: string | null;
  primary_email: string | null;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
  origin: Origin;
}

/** What a valid body defines (create, update, gateway.yaml). */
export type CustomerDefinition = Pick<Customer, 'key' | 'name' | 'description' | 'labels' | 'usage_attribution' | 'currency' | 'primary_email'>;

const FIELDS = ['key', 'name', 'description', 'labels', 'usage_attribution', 'currency', 'primary_email'] as const;
const MAX_SUBJECT_KEYS = 100;

/** Every problem of a customer body; `definition` when there is none. */
export function validateCustomer(body: unknown): { definition?: CustomerDefinition; problems: Problems } {
  if (!isObject(body)) return { problems: [invalid('', 'request body must be a JSON object', 'type')] };
  const out: Problems = [];
  sealed(body, FIELDS, '', out);
  const key = text(body, 'key', '', { required: true, min: 1, max: 256 }, out);
  const customerName = name(body, '', out);
  const desc = description(body, '', out);
  const customerLabels = labels(body, '', out);
  const subjectKeys = usageAttribution(body, out);
  const currency = currencyField(body, out);
  const email = text(body, 'primary_email', '', { max: 256 }, out) ?? null;
  if (out.length > 0) return { problems: out };
  return {
    definition: {
      key: key!,
      name: customerName!,
      description: desc,
      labels: customerLabels,
      usage_attribution: { subject_keys: subjectKeys },
      currency,
      primary_email: email,
    },
    problems: out,
  };
}

function usageAttribution(body: Body, out: Problems): string[] {
  const v = body.usage_attribution;
  if (v === undefined || v === null) return [];
  if (!isObject(v)) return out.push(invalid('usage_attribution', 'must be an object', 'type')), [];
  sealed(v, ['subject_keys'], 'usage_attribution', out);
  const list = array(v, 'subject_keys', 'usage_attribution', out, { max: MAX_SUBJECT_KEYS }) ?? [];
  const result: string[] = [];
  list.forEach((s, i) => {
    const field = `usage_attribution.subject_keys[${i}]`;
    if (typeof s !== 'string' || s.length < 1 || s.length > 256) out.push(invalid(field, 'must be a string of 1 to 256 characters', 'is_string'));
    else if (result.includes(s)) out.push(invalid(field, `duplicate subject key: ${s}`, 'unique'));
    else result.push(s);
  });
  return result;
}

function currencyField(body: Body, out: Problems): string | null {
  const v = body.currency;
  if (v === undefined || v === null) return null;
  const currency = currencyOf(v);
  if (currency === 'unknown') return out.push(invalid('currency', `invalid currency code: ${String(v)}`, 'currency_not_found')), null;
  if (currency === 'not_fiat') return out.push(invalid('currency', `customer currency "${v}" must be fiat`, 'currency_invalid')), null;
  return currency.code;
}

/** The subjects whose events are the customer's usage. */
export function usageSubjects(c: Pick<Customer, 'key' | 'usage_attribution'>): string[] {
  return c.usage_attribution.subject_keys.length > 0 ? c.usage_attribution.subject_keys : [c.key];
}

function usageCustomer(c: Customer): UsageCustomer {
  return { id: c.id, key: c.key, name: c.name, subjects: usageSubjects(c) };
}

export function publicCustomer(c: Customer): Record<string, unknown> {
  const { origin: _origin, ...rest } = c;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(rest)) if (v !== null && !(k === 'labels' && Object.keys(v as object).length === 0)) out[k] = v;
  return out;
}

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** A subscription of the customer, not yet ended, that invoices in another currency than `currency` (read into `tx`). */
export type CurrencyConflict = (tx: Transaction, customerId: string, currency: string) => Promise<{ id: string; currency: string } | undefined>;

export class CustomerService {
  constructor(
    private readonly db: BillingStore,
    private readonly subscriptionInOtherCurrency: CurrencyConflict,
  ) {}

  /** By id (deleted ones too) or by the key of a live customer. */
  async find(idOrKey: string, tx?: Transaction): Promise<Customer | undefined> {
    const get = <T>(key: string) => (tx ? tx.get<T>(key) : this.db.get<T>(key));
    if (ULID.test(idOrKey)) {
      const byId = await get<Customer>(keys.customer(idOrKey));
      if (byId) return byId;
    }
    const id = await get<string>(keys.customerKey(idOrKey));
    return id === undefined ? undefined : get<Customer>(keys.customer(id));
  }

  async get(idOrKey: string, tx?: Transaction): Promise<Customer> {
    const c = await this.find(idOrKey, tx);
    if (!c) throw notFound('customer', idOrKey);
    return c;
  }

  /** A live customer, or 410 when deleted (PUT, DELETE of API-made customers). */
  private async mutable(tx: Transaction, idOrKey: string, origin: Origin): Promise<Customer> {
    const c = await this.get(idOrKey, tx);
    if (c.deleted_at) throw gone('customer', idOrKey);
    if (c.origin !== origin) throw readOnly('customer', c.key);
    return c;
  }

  list(): Promise<Customer[]> {
    return this.db.list<Customer>(PREFIXES.customers);
  }

  /** The customers as usage queries read them (metering's side of the usage attribution). */
  directory(): CustomerDirectory {
    return {
      find: async (idOrKey) => {
        const c = await this.find(idOrKey);
        return c && usageCustomer(c);
      },
      live: async () => (await this.list()).filter((c) => !c.deleted_at).map(usageCustomer),
    };
  }

  /**
   * The live customer an identifier names: the one whose key it is (the key owner wins, as OpenMeter),
   * else the one that lists it as a usage subject.
   */
  async resolve(identifier: string): Promise<Customer | undefined> {
    const id = (await this.db.get<string>(keys.customerKey(identifier))) ?? (await this.db.get<string>(keys.subject(identifier)));
    return id === undefined ? undefined : this.db.get<Customer>(keys.customer(id));
  }

  create(def: CustomerDefinition, origin: Origin = 'api', id = ulid()): Promise<Customer> {
    return this.db.transact(async (tx) => {
      await this.claimKey(tx, def.key, id);
      await this.claimSubjects(tx, usageSubjects(def), id);
      const now = formatInstant(Date.now());
      const customer: Customer = { id, ...def, created_at: now, updated_at: now, deleted_at: null, origin };
      tx.put(keys.customer(id), customer);
      return customer;
    }, 'customer');
  }

  private async claimKey(tx: Transaction, key: string, id: string): Promise<void> {
    const holder = await tx.get<string>(keys.customerKey(key));
    if (holder !== undefined && holder !== id) throw conflict(`customer with key ${key} already exists`);
    // A key may not be another customer's usage subject (OpenMeter: "overlaps with subject").
    const subjectHolder = await tx.get<string>(keys.subject(key));
    if (subjectHolder !== undefined && subjectHolder !== id) throw conflict(`customer key ${key} overlaps with subject key of customer ${subjectHolder}`);
    tx.put(keys.customerKey(key), JSON.stringify(id));
  }

  private async claimSubjects(tx: Transaction, subjects: string[], id: string): Promise<void> {
    for (const subject of subjects) {
      const holder = await tx.get<string>(keys.subject(subject));
      if (holder !== undefined && holder !== id) throw conflict(`subject key ${subject} is already used by customer ${holder}`);
      tx.put(keys.subject(subject), JSON.stringify(id));
    }
  }

  /**
   * Replaces name, description (cleared when omitted) and whatever else the body gives; the key never
   * changes. Usage subjects cannot change while a subscription is live (its invoices read them), nor can
   * the currency become another than the one a live priced subscription invoices in.
   */
  update(idOrKey: string, def: CustomerDefinition, given: ReadonlySet<string>, origin: Origin = 'api'): Promise<Customer> {
    return this.db.transact(async (tx) => {
      const current = await this.mutable(tx, idOrKey, origin);
      const next: Customer = {
        ...current,
        name: def.name,
        description: def.description,
        labels: given.has('labels') ? def.labels : current.labels,
        usage_attribution: given.has('usage_attribution') ? def.usage_attribution : current.usage_attribution,
        currency: given.has('currency') ? def.currency : current.currency,
        primary_email: given.has('primary_email') ? def.primary_email : current.primary_email,
        updated_at: formatInstant(Date.now()),
      };
      if (next.currency !== null && next.currency !== current.currency) await this.checkCurrency(tx, current, next.currency);
      const before = usageSubjects(current);
      const after = usageSubjects(next);
      if (before.join('\u0000') !== after.join('\u0000')) {
        if (await liveSubscriptionOf(tx, current.id, Date.now())) {
          throw validationFailed([invalid('usage_attribution.subject_keys', 'the subject keys of a customer with a live subscription cannot change', 'customer_subject_keys_locked', { code: 'customer_subject_keys_locked' })]);
        }
        for (const s of before) if (!after.includes(s)) tx.del(keys.subject(s));
        await this.claimSubjects(tx, after, current.id);
      }
      tx.put(keys.customer(current.id), next);
      return next;
    }, 'customer');
  }

  /** The rule a subscription's creation checks (currency_mismatch), from the customer's side. */
  private async checkCurrency(tx: Transaction, customer: Customer, currency: string): Promise<void> {
    const live = await this.subscriptionInOtherCurrency(tx, customer.id, currency);
    if (live) {
      throw ruleBroken('currency_mismatch', `currency mismatch: customer currency would be ${currency}, but subscription ${live.id} invoices in ${live.currency}; cancel it first`, 'currency');
    }
  }

  /** Soft delete: the key and subjects become free for others. Refused while a subscription is live. */
  delete(idOrKey: string, origin: Origin = 'api'): Promise<void> {
    return this.db.transact(async (tx) => {
      const current = await this.get(idOrKey, tx);
      if (current.deleted_at) return;
      if (current.origin !== origin) throw readOnly('customer', current.key);
      if (await liveSubscriptionOf(tx, current.id, Date.now())) throw conflict(`customer ${current.key} still has an active subscription; cancel it first`);
      const now = formatInstant(Date.now());
      tx.put(keys.customer(current.id), { ...current, deleted_at: now, updated_at: now });
      tx.del(keys.customerKey(current.key));
      for (const s of usageSubjects(current)) tx.del(keys.subject(s));
    }, 'customer');
  }
}

