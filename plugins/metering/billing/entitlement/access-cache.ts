/**
 * The entitlement decisions the gateway enforces, kept in memory so a request is decided without a
 * store read: per customer identifier (key first, then usage subjects), the grants of its active
 * subscription, and for metered ones the committed usage of the current usage period.
 *
 * A metered grant whose meter adds up (count, sum) admits through its admission counter (admissions.ts):
 * each request reserves before it goes on and is settled with what its events add when it ends, so a
 * hard limit admits at most its limit whatever the burst, on one process, on a node of workers and on
 * several nodes. The counter is raised to the committed usage known here, so usage it never saw (posted
 * events, an earlier run) counts too. Other meters (unique_count, latest, ...) decide on committed usage.
 *
 * How committed usage stays fresh (what a second process or node relies on, see docs/billing.md):
 * - alone on its store, this process commits every event: usage is read once per period, with no commit
 *   landing during the read, then kept exact by adding what the writer commits (a re-read now and then
 *   catches meter changes);
 * - on a shared store (workers, PostgreSQL): re-read from the store every second;
 * - only events dated in the current usage period count in it: one dated in another period changes that
 *   period's usage, never the current decision;
 * - customers, subscriptions and plans: rebuilt from the store on every billing change notice (all
 *   processes sharing the store get them) and every few seconds regardless (bounded staleness if a
 *   notice is lost); a subscription that ends or starts makes its customer undecided until the next
 *   rebuild, which it triggers;
 * - usage periods roll over by the clock of the request; the scheduler's reset notice only makes every
 *   node re-read at once.
 */
import type { Logger } from 'pino';
import type { Notices, QuotaAnswer, QuotaRequest } from '../../../../src/pdk/index.ts';
import { Reservation, type AdmissionLedger } from './admissions.ts';
import { eventSeconds, type Instant, type Period } from '../shared/calendar.ts';
import { usageSubjects, type Customer, type CustomerService } from '../customer/port.ts';
import { grantsOf, usagePeriodAt, type EntitlementService, type Grant } from './entitlements.ts';
import { Decimal, formatDecimal, ZERO } from '../shared/money.ts';
import { CHANGES_TOPIC, RESETS_TOPIC } from '../shared/store.ts';
import { billingPeriodAt, type Subscription, type SubscriptionService } from '../subscription/port.ts';
import type { CommittedReading, DimensionFilter, RequestEvent, UsageSource } from '../shared/usage.ts';

export type AccessDecision =
  | { kind: 'allowed'; limit?: string; remaining?: string }
  | { kind: 'limit_reached'; limit: string; remaining: string; resetAt: Instant }
  | { kind: 'no_feature' }
  | { kind: 'unknown_customer' }
  | { kind: 'undecided' };

/** A decision, and for a request admitted through a metered limit its reservation (settle it when the request ends). */
export interface Admission {
  decision: AccessDecision;
  reservation?: Reservation;
}

/** What the `entitlement-enforcement` plugin uses (the plugin service `billing.entitlements`). */
export interface EntitlementEnforcer {
  /**
   * The decision for the first identifier that names a customer, for a request that started at `at` (its
   * events carry that time, so its usage belongs to that instant's period). From memory, but for a
   * metered limit's counter when it is kept outside this process (then the answer is a promise).
   */
  admit(identifiers: readonly (string | null | undefined)[], featureKey: string, at: Instant): Admission | Promise<Admission>;
}

const ONE = new Decimal(1);
const ALLOWED: Admission = { decision: { kind: 'allowed' } };
const NO_FEATURE: Admission = { decision: { kind: 'no_feature' } };
const UNKNOWN: Admission = { decision: { kind: 'unknown_customer' } };
const UNDECIDED: Admission = { decision: { kind: 'undecided' } };

/** Meters whose events change usage by a known amount: their requests are counted as they are admitted. */
const ADDITIVE = new Set(['count', 'sum']);
/** Change notices that can change who has which grant (invoices and the scheduler's progress cannot). */
const GRANT_CHANGES = new Set(['customer', 'subscription']);
const REBUILD_EVERY_MS = 5_000;
/** Committed usage re-read on a shared store, where other processes commit. */
const SHARED_REFRESH_MS = 1_000;
/** Alone, committed usage is kept by the writer's commits; the re-read only catches meter changes. */
const ALONE_REFRESH_MS = 30_000;
const REFRESH_CONCURRENCY = 8;
/** An admission counter outlives its period by this much (a request decided just before the end settles after it). */
const COUNTER_MARGIN_MS = 3_600_000;

interface MeteredState {
  grant: Grant;
  /** Which admission counter the grant's requests reserve on: the subscription's feature in this period. */
  counter: string;
  aggregation: string;
  period: Period;
  /** The grant's limit, as decimal text. */
  limit: string;
  /** Committed usage of the period, as this process knows it (decimal text). */
  usage: string;
  /** The first read of the period's usage, while it runs: decisions wait for it. */
  reading: Promise<void> | undefined;
}

interface Entry {
  customerId: string;
  subscriptionId: string | null;
  /** The subscription's grants stop being the customer's at this instant (Infinity: open-ended). */
  validUntil: Instant;
  fixed: Map<string, Admission>;
  metered: Map<string, MeteredState>;
}

function matches(filters: Record<string, DimensionFilter>, dimensions: Record<string, string>): boolean {
  for (const name in filters) {
    const f = filters[name];
    const v = dimensions[name] ?? '';
    if ('eq' in f ? v !== f.eq : !f.in.includes(v)) return false;
  }
  return true;
}

/** The decision of committed usage alone (meters whose admissions cannot be counted). */
function decisionOf(state: MeteredState, used: Decimal): AccessDecision {
  const { grant } = state;
  const limit = grant.limit!;
  const remaining = formatDecimal(Decimal.max(limit.minus(used), ZERO));
  if (grant.soft || used.lessThan(limit)) return { kind: 'allowed', limit: formatDecimal(limit), remaining };
  return { kind: 'limit_reached', limit: formatDecimal(limit), remaining, resetAt: state.period.to };
}

export class AccessCache implements EntitlementEnforcer {
  private byIdentifier = new Map<string, Entry>();
  private bySubject = new Map<string, Entry>();
  private watchedMeters = new Set<string>();
  private ready = false;
  private rebuilding: Promise<void> | undefined;
  private rebuildAgain = false;
  private timers: NodeJS.Timeout[] = [];
  private readonly unsubscribe: (() => void)[] = [];
  private refreshing = false;

  constructor(
    private readonly customers: CustomerService,
    private readonly subscriptions: SubscriptionService,
    private readonly entitlements: EntitlementService,
    private readonly usage: UsageSource,
    private readonly notices: Notices,
    private readonly admissions: AdmissionLedger,
    /** This process commits every event of its store itself (no worker, no other node). */
    private readonly alone: boolean,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    this.unsubscribe.push(
      this.notices.subscribe(CHANGES_TOPIC, (what) => (what === null || GRANT_CHANGES.has(what) ? this.requestRebuild() : undefined)),
      this.notices.subscribe(RESETS_TOPIC, (customerId) => (customerId === null ? this.requestRebuild() : this.rollOver(customerId))),
    );
    // The writer's commits are every commit only when this process is alone; elsewhere usage is re-read.
    if (this.alone) this.unsubscribe.push(this.usage.onCommitted(() => this.watchedMeters, (readings) => this.addCommitted(readings)));
    await this.requestRebuild();
    const refreshMs = this.alone ? ALONE_REFRESH_MS : SHARED_REFRESH_MS;
    this.timers.push(setInterval(() => void this.requestRebuild(), REBUILD_EVERY_MS).unref(), setInterval(() => void this.refresh(), refreshMs).unref());
  }

  stop(): void {
    this.timers.forEach(clearInterval);
    this.unsubscribe.forEach((u) => u());
  }

  admit(identifiers: readonly (string | null | undefined)[], featureKey: string, at: Instant): Admission | Promise<Admission> {
    if (!this.ready) return UNDECIDED;
    let entry: Entry | undefined;
    for (const id of identifiers) if (id && (entry = this.byIdentifier.get(id))) break;
    if (!entry) return UNKNOWN;
    if (at >= entry.validUntil) {
      void this.requestRebuild();
      return UNDECIDED;
    }
    const fixed = entry.fixed.get(featureKey);
    if (fixed) return fixed;
    const state = entry.metered.get(featureKey);
    if (!state) return NO_FEATURE;
    if (at >= state.period.to) this.startPeriod(state, at);
    // A request that started before the period (it waited) is decided in the current one: its events, dated
    // in the earlier period, then settle nothing here, and it gives its place back.
    if (state.reading) return state.reading.then(() => this.admitMetered(state));
    return this.admitMetered(state);
  }

  private admitMetered(state: MeteredState): Admission | Promise<Admission> {
    if (!ADDITIVE.has(state.aggregation)) return { decision: decisionOf(state, new Decimal(state.usage)) };
    const { grant } = state;
    const request: QuotaRequest = {
      key: state.counter,
      limit: state.limit,
      soft: grant.soft,
      floor: state.usage,
      // A sum's amount is known once the request ends: until then it admits while the counter is below the limit.
      amount: state.aggregation === 'count' ? '1' : '0',
      requests: 1,
      expiresAt: state.period.to + COUNTER_MARGIN_MS,
    };
    let answer: QuotaAnswer | Promise<QuotaAnswer>;
    try {
      answer = this.admissions.reserve(request);
    } catch (err) {
      return this.undecided(err);
    }
    if (!(answer instanceof Promise)) return this.admitted(state, request, answer);
    return answer.then(
      (reserved) => this.admitted(state, request, reserved),
      (err) => this.undecided(err),
    );
  }

  private undecided(err: unknown): Admission {
    this.log.warn({ err }, 'billing: an admission counter could not be read; the request is undecided');
    return UNDECIDED;
  }

  private admitted(state: MeteredState, request: QuotaRequest, answer: QuotaAnswer): Admission {
    const { limit } = request;
    const { remaining } = answer;
    if (!answer.reserved) return { decision: { kind: 'limit_reached', limit, remaining, resetAt: state.period.to } };
    // The period the request was decided in (its events carry the request's start, which lies in it).
    const { grant, period, aggregation } = state;
    const reservation = new Reservation(this.admissions, request, (events) => this.amountOf(grant, aggregation, period, events));
    return { decision: { kind: 'allowed', limit, remaining }, reservation };
  }

  /** What a request's events add to the grant's meter in `period` (as its commit will count them). */
  private amountOf(grant: Grant, aggregation: string, period: Period, events: readonly RequestEvent[]): string {
    if (!grant.meter || events.length === 0) return '0';
    const readings = this.usage.readingsOf(events, grant.meter.id).filter((r) => this.counts(grant, period, r));
    if (aggregation === 'count') return String(readings.length);
    return formatDecimal(readings.reduce((sum, r) => sum.plus(readingAmount(aggregation, r)), ZERO));
  }

  /** Whether a committed reading belongs to the grant's usage in `period` (its subjects, filters and seconds). */
  private counts(grant: Grant, period: Period, r: CommittedReading): boolean {
    const seconds = eventSeconds(period);
    return r.time >= seconds.from && r.time < seconds.to && grant.subjects.includes(r.subject) && matches(grant.meter!.filters, r.dimensions);
  }


  private startPeriod(state: MeteredState, at: Instant): void {
    state.period = usagePeriodAt(state.grant, at);
    state.counter = counterKey(state.grant, state.period);
    state.usage = '0';
    state.reading = this.read(state).finally(() => (state.reading = undefined));
  }

  /** Rebuilds soon; concurrent requests share one rebuild (plus one more if asked for during it). */
  private requestRebuild(): Promise<void> {
    if (this.rebuilding) {
      this.rebuildAgain = true;
      return this.rebuilding;
    }
    this.rebuilding = (async () => {
      do {
        this.rebuildAgain = false;
        try {
          await this.rebuild(Date.now());
        } catch (err) {
          this.log.error({ err }, 'billing: rebuilding the entitlement cache failed; keeping the previous one');
        }
      } while (this.rebuildAgain);
      this.rebuilding = undefined;
    })();
    return this.rebuilding;
  }

  private async rebuild(now: Instant): Promise<void> {
    const live = (await this.customers.list()).filter((c) => c.deleted_at === null);
    const byCustomer = new Map<string, Subscription[]>();
    for (const s of await this.subscriptions.list()) byCustomer.set(s.customer.id, [...(byCustomer.get(s.customer.id) ?? []), s]);
    const byIdentifier = new Map<string, Entry>();
    const bySubject = new Map<string, Entry>();
    const watched = new Set<string>();
    const entries: [Customer, Entry][] = [];
    for (const c of live) {
      const s = byCustomer.get(c.id)?.find((x) => billingPeriodAt(x, now) !== undefined);
      const next = byCustomer.get(c.id)?.filter((x) => Date.parse(x.active_from) > now).map((x) => Date.parse(x.active_from)) ?? [];
      const entry = await this.entryOf(c, s, now, Math.min(s?.active_to ? Date.parse(s.active_to) : Infinity, ...next));
      for (const state of entry.metered.values()) if (ADDITIVE.has(state.aggregation)) watched.add(state.grant.meter!.id);
      entries.push([c, entry]);
    }
    // Keys first: an identifier that is one customer's key and another's subject names the key's owner.
    for (const [c, entry] of entries) byIdentifier.set(c.key, entry);
    for (const [c, entry] of entries) {
      for (const subject of usageSubjects(c)) {
        if (!byIdentifier.has(subject)) byIdentifier.set(subject, entry);
        bySubject.set(subject, entry);
      }
    }
    this.byIdentifier = byIdentifier;
    this.bySubject = bySubject;
    this.watchedMeters = watched;
    this.ready = true;
  }

  /** The customer's entry, keeping the usage already known for an unchanged grant and period. */
  private async entryOf(c: Customer, s: Subscription | undefined, now: Instant, validUntil: Instant): Promise<Entry> {
    const previous = this.bySubject.get(usageSubjects(c)[0]);
    const entry: Entry = { customerId: c.id, subscriptionId: s?.id ?? null, validUntil, fixed: new Map(), metered: new Map() };
    for (const grant of s ? grantsOf(s) : []) {
      if (grant.type !== 'metered') {
        entry.fixed.set(grant.featureKey, ALLOWED);
        continue;
      }
      const period = usagePeriodAt(grant, now);
      const kept = previous?.customerId === c.id && previous.subscriptionId === entry.subscriptionId ? previous.metered.get(grant.featureKey) : undefined;
      if (kept && kept.period.from === period.from) {
        entry.metered.set(grant.featureKey, kept);
        continue;
      }
      const aggregation = this.usage.meter(grant.meter?.id ?? '')?.aggregation ?? '';
      const state: MeteredState = { grant, counter: counterKey(grant, period), aggregation, period, limit: formatDecimal(grant.limit!), usage: '0', reading: undefined };
      await this.read(state);
      entry.metered.set(grant.featureKey, state);
    }
    return entry;
  }

  /**
   * Reads a metered state's committed usage from the store. Alone on the store the read is consistent
   * with the writer's commits (none lands during it), so adding later commits counts each event once.
   */
  private async read(state: MeteredState): Promise<void> {
    const period = state.period;
    const stored = await this.entitlements.usageOf(state.grant, period, { consistent: this.alone });
    if (state.period === period) state.usage = formatDecimal(stored);
  }

  /** Every metered state's committed usage from the store (what other processes and nodes committed). */
  private async refresh(): Promise<void> {
    if (this.refreshing || !this.ready) return;
    this.refreshing = true;
    try {
      const states = [...new Set(this.bySubject.values())].flatMap((e) => [...e.metered.values()]);
      const now = Date.now();
      for (const s of states) if (now >= s.period.to) this.startPeriod(s, now);
      for (let i = 0; i < states.length; i += REFRESH_CONCURRENCY)
        await Promise.all(states.slice(i, i + REFRESH_CONCURRENCY).map((s) => s.reading ?? this.read(s)));
    } catch (err) {
      this.log.warn({ err }, 'billing: re-reading usage for entitlements failed; retrying');
    } finally {
      this.refreshing = false;
    }
  }

  /** A usage period of the customer reset somewhere: re-read its metered states now. */
  private rollOver(customerId: string): void {
    const entry = [...this.bySubject.values()].find((e) => e.customerId === customerId);
    if (!entry) return;
    const now = Date.now();
    for (const state of entry.metered.values()) {
      if (now >= state.period.to) this.startPeriod(state, now);
      else void this.read(state).catch(() => undefined);
    }
  }

  /** Usage this process just committed (alone, that is every commit): counted at once, in its own period only. */
  private addCommitted(readings: CommittedReading[]): void {
    for (const r of readings) {
      const entry = this.bySubject.get(r.subject);
      if (!entry) continue;
      for (const state of entry.metered.values()) {
        if (state.grant.meter?.id !== r.meterId || !ADDITIVE.has(state.aggregation) || !this.counts(state.grant, state.period, r)) continue;
        state.usage = formatDecimal(readingAmount(state.aggregation, r).plus(state.usage));
      }
    }
  }
}

/** What one reading adds to an additive meter's usage. */
function readingAmount(aggregation: string, r: CommittedReading): Decimal {
  if (aggregation === 'count') return ONE;
  return r.value === undefined ? ZERO : new Decimal(r.value);
}

/** The admission counter of a grant's usage period (the subscription's feature in that period). */
function counterKey(grant: Grant, period: Period): string {
  return `admitted/${grant.subscriptionId}/${grant.featureKey}/${period.from}`;
}
