/**
 * Billing's storage: its own namespace of the metering plugin's store, JSON records, and optimistic
 * transactions. Every write goes through `commitIf` with the values the transaction read as its
 * expectations, so two processes or nodes changing the same records cannot both win: the loser
 * re-reads and tries again. Uniqueness (customer keys, subject keys, one subscription per customer,
 * one invoice per subscription period) is held by index keys read and written in the same commit.
 *
 *   customer/<id>                     customer record
 *   customer-key/<key>                live customer key -> customer id
 *   subject/<subject>                 live usage subject -> customer id
 *   subject-record/<subject>          a subject's display name and metadata (OpenMeter v1 subjects)
 *   portal-token/<id>                 a consumer portal token (its secret is stored only as a hash)
 *   portal-token-hash/<sha256>        the token's SHA-256 -> its id (expires with the token)
 *   feature/<id>, feature-key/<key>   feature record; live feature key -> id
 *   plan/<id>, plan-key/<key>         plan version record; the key's versions (draft, active, last number)
 *   subscription/<id>                 subscription record (with its plan version copied in)
 *   customer-subscription/<cid>/<sid> the customer's subscriptions
 *   customer-slot/<cid>               the customer's latest subscription (one at a time)
 *   invoice/<id>                      issued invoice (deterministic id per subscription, period and kind)
 *   customer-invoice/<cid>/<id>       the customer's invoices
 *   invoice-counter                   the last invoice number handed out
 *   schedule/<sid>                    what the scheduler has done for a subscription
 *   lease/<name>                      leases of the scheduler and of the gateway.yaml sync (expire)
 *   declared                          digest of the gateway.yaml declarations last applied in full
 */
import type { BatchOp, Store } from '../../../../src/pdk/index.ts';
import { escapePart } from '../../shared/keys.ts';
import { contention } from './errors.ts';

export const keys = {
  customer: (id: string) => `customer/${id}`,
  customerKey: (key: string) => `customer-key/${escapePart(key)}`,
  subject: (subject: string) => `subject/${escapePart(subject)}`,
  subjectRecord: (subject: string) => `subject-record/${escapePart(subject)}`,
  portalToken: (id: string) => `portal-token/${id}`,
  portalTokenHash: (hash: string) => `portal-token-hash/${hash}`,
  feature: (id: string) => `feature/${id}`,
  featureKey: (key: string) => `feature-key/${key}`,
  plan: (id: string) => `plan/${id}`,
  planKey: (key: string) => `plan-key/${key}`,
  subscription: (id: string) => `subscription/${id}`,
  customerSubscription: (customerId: string, id: string) => `customer-subscription/${customerId}/${id}`,
  customerSubscriptions: (customerId: string) => `customer-subscription/${customerId}/`,
  slot: (customerId: string) => `customer-slot/${customerId}`,
  invoice: (id: string) => `invoice/${id}`,
  customerInvoice: (customerId: string, id: string) => `customer-invoice/${customerId}/${id}`,
  customerInvoices: (customerId: string) => `customer-invoice/${customerId}/`,
  invoiceCounter: 'invoice-counter',
  schedule: (subscriptionId: string) => `schedule/${subscriptionId}`,
  lease: (name: string) => `lease/${name}`,
  declared: 'declared',
};

export const PREFIXES = {
  customers: 'customer/',
  subjectRecords: 'subject-record/',
  portalTokens: 'portal-token/',
  features: 'feature/',
  plans: 'plan/',
  subscriptions: 'subscription/',
  invoices: 'invoice/',
  schedules: 'schedule/',
};

/** The notice topic every committed billing change is announced on (for caches of other processes). */
export const CHANGES_TOPIC = 'changes';

/** The topic usage-period resets are announced on (message: the customer id; scheduler.ts). */
export const RESETS_TOPIC = 'usage-resets';

/** A unit of work: what it read becomes the commit's expectations, what it wrote its operations. */
export class Transaction {
  private readonly reads = new Map<string, string | undefined>();
  private readonly writes = new Map<string, BatchOp>();

  constructor(private readonly store: Store) {}

  async get<T>(key: string): Promise<T | undefined> {
    const text = await this.text(key);
    return text === undefined ? undefined : (JSON.parse(text) as T);
  }

  async text(key: string): Promise<string | undefined> {
    const written = this.writes.get(key);
    if (written) return written.type === 'put' ? written.value : undefined;
    if (!this.reads.has(key)) this.reads.set(key, await this.store.get(key));
    return this.reads.get(key);
  }

  put(key: string, value: unknown, ttlMs?: number): void {
    this.writes.set(key, { type: 'put', key, value: typeof value === 'string' ? value : JSON.stringify(value), ttlMs });
  }

  del(key: string): void {
    this.writes.set(key, { type: 'del', key });
  }

  get empty(): boolean {
    return this.writes.size === 0;
  }

  commit(): Promise<boolean> {
    const expectations = [...this.reads].map(([key, value]) => ({ key, value }));
    return this.store.commitIf(expectations, [...this.writes.values()], { sync: true });
  }
}

/** Attempts before a transaction gives up on contention (each lost race re-reads everything). */
const MAX_ATTEMPTS = 50;

export class BillingStore {
  constructor(readonly store: Store) {}

  async get<T>(key: string): Promise<T | undefined> {
    const text = await this.store.get(key);
    return text === undefined ? undefined : (JSON.parse(text) as T);
  }

  async getMany<T>(keyList: string[]): Promise<(T | undefined)[]> {
    const texts = await this.store.getMany(keyList);
    return texts.map((t) => (t === undefined ? undefined : (JSON.parse(t) as T)));
  }

  /** Every record under a prefix, in key order. */
  async list<T>(prefix: string): Promise<T[]> {
    const out: T[] = [];
    for await (const [, value] of this.store.scan({ prefix })) out.push(JSON.parse(value) as T);
    return out;
  }

  /** Every key under a prefix, without the prefix. */
  async keysUnder(prefix: string): Promise<string[]> {
    const out: string[] = [];
    for await (const [key] of this.store.scan({ prefix })) out.push(key.slice(prefix.length));
    return out;
  }

  /**
   * Runs `work` until its commit succeeds (it is run again, from fresh reads, after a lost race), and
   * announces the change to every process sharing the store. `work` must only read through `tx`
   * what its decision depends on, and must throw (not write) when it refuses.
   */
  async transact<T>(work: (tx: Transaction) => Promise<T>, announce = 'changed'): Promise<T> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const tx = new Transaction(this.store);
      const result = await work(tx);
      if (tx.empty) return result;
      if (await tx.commit()) {
        await this.store.notices.publishAndWait(CHANGES_TOPIC, announce);
        return result;
      }
      // Spread the retries of racing writers apart.
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 ** attempt)));
    }
    throw contention();
  }
}

export { Lease } from '../../shared/lease.ts';
