/**
 * The entitlement decisions the gateway enforces, kept in memory so a request is decided without a
 * store read: per customer identifier (key first, then usage subjects), the grants of its active
 * subscription, and for metered ones the usage of the current usage period and a ready decision.
 *
 * How it stays fresh (what a second process or node relies on, see docs/billing.md):
 * - customers, subscriptions and plans: rebuilt from the store on every billing change notice (all
 *   processes sharing the store get them) and every few seconds regardless (bounded staleness if a
 *   notice is lost); a subscription that ends or starts makes its customer undecided until the next
 *   rebuild, which it triggers;
 * - usage committed by this process: added as the metering writer commits it (count and sum meters);
 * - usage committed elsewhere (and by unique_count or latest meters): re-read from the store every
 *   second, so what is admitted past a limit is bounded by the requests in flight plus one second of
 *   usage;
 * - usage periods roll over by the clock in the decision itself; the scheduler's reset notice only
 *   makes every node re-read at once.
 */
import type { Logger } from 'pino';
import type { Notices } from '../../../src/pipeline/plugin-api.ts';
import type { Instant, Period } from './calendar.ts';
import type { Customer, CustomerService } from './customers.ts';
import { usageSubjects } from './customers.ts';
import { grantsOf, usagePeriodAt, type EntitlementService, type Grant } from './entitlements.ts';
import { Decimal, formatDecimal, ZERO } from './money.ts';
import { RESETS_TOPIC } from './scheduler.ts';
import { CHANGES_TOPIC } from './store.ts';
import { billingPeriodAt, type Subscription, type SubscriptionService } from './subscriptions.ts';
import type { CommittedReading, DimensionFilter, UsageSource } from './usage.ts';

export type AccessDecision =
  | { kind: 'allowed'; limit?: string; remaining?: string }
  | { kind: 'limit_reached'; limit: string; remaining: string; resetAt: Instant }
  | { kind: 'no_feature' }
  | { kind: 'unknown_customer' }
  | { kind: 'undecided' };

/** What the `entitlement-enforcement` plugin uses (the plugin service `billing.entitlements`). */
export interface EntitlementEnforcer {
  /** The decision for the first identifier that names a customer, from memory only. */
  decide(identifiers: readonly (string | null | undefined)[], featureKey: string, now: Instant): AccessDecision;
}

const ALLOWED: AccessDecision = { kind: 'allowed' };
const NO_FEATURE: AccessDecision = { kind: 'no_feature' };
const UNKNOWN: AccessDecision = { kind: 'unknown_customer' };
const UNDECIDED: AccessDecision = { kind: 'undecided' };

/** Meters whose committed events change usage by a known amount (the others wait for the re-read). */
const ADDITIVE = new Set(['count', 'sum']);
/** Change notices that can change who has which grant (invoices and the scheduler's progress cannot). */
const GRANT_CHANGES = new Set(['customer', 'subscription']);
const REBUILD_EVERY_MS = 5_000;
const REFRESH_EVERY_MS = 1_000;
const REFRESH_CONCURRENCY = 8;

interface MeteredState {
  grant: Grant;
  aggregation: string;
  period: Period;
  usage: Decimal;
  /** Local usage added while a re-read is in flight (the re-read may not include it). */
  sinceRead: Decimal | undefined;
  decision: AccessDecision;
}

interface Entry {
  customerId: string;
  subscriptionId: string | null;
  /** The subscription's grants stop being the customer's at this instant (Infinity: open-ended). */
  validUntil: Instant;
  fixed: Map<string, AccessDecision>;
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

function decisionOf(state: MeteredState): AccessDecision {
  const { grant, usage } = state;
  const limit = grant.limit!;
  const remaining = formatDecimal(Decimal.max(limit.minus(usage), ZERO));
  if (grant.soft || usage.lessThan(limit)) return { kind: 'allowed', limit: formatDecimal(limit), remaining };
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
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    this.unsubscribe.push(
      this.notices.subscribe(CHANGES_TOPIC, (what) => (what === null || GRANT_CHANGES.has(what) ? this.requestRebuild() : undefined)),
      this.notices.subscribe(RESETS_TOPIC, (customerId) => (customerId === null ? this.requestRebuild() : this.rollOver(customerId))),
      this.usage.onCommitted(() => this.watchedMeters, (readings) => this.addLocal(readings)),
    );
    await this.requestRebuild();
    this.timers.push(setInterval(() => void this.requestRebuild(), REBUILD_EVERY_MS).unref(), setInterval(() => void this.refresh(), REFRESH_EVERY_MS).unref());
  }

  stop(): void {
    this.timers.forEach(clearInterval);
    this.unsubscribe.forEach((u) => u());
  }

  decide(identifiers: readonly (string | null | undefined)[], featureKey: string, now: Instant): AccessDecision {
    if (!this.ready) return UNDECIDED;
    let entry: Entry | undefined;
    for (const id of identifiers) if (id && (entry = this.byIdentifier.get(id))) break;
    if (!entry) return UNKNOWN;
    if (now >= entry.validUntil) {
      void this.requestRebuild();
      return UNDECIDED;
    }
    const fixed = entry.fixed.get(featureKey);
    if (fixed) return fixed;
    const state = entry.metered.get(featureKey);
    if (!state) return NO_FEATURE;
    if (now >= state.period.to) this.startPeriod(state, now);
    return state.decision;
  }

  private startPeriod(state: MeteredState, now: Instant): void {
    state.period = usagePeriodAt(state.grant, now);
    state.usage = ZERO;
    state.decision = decisionOf(state);
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
      const state: MeteredState = { grant, aggregation: this.usage.meter(grant.meter?.id ?? '')?.aggregation ?? '', period, usage: ZERO, sinceRead: undefined, decision: UNDECIDED };
      await this.read(state);
      entry.metered.set(grant.featureKey, state);
    }
    return entry;
  }

  /** Re-reads a metered state's usage from the store, keeping local usage committed meanwhile. */
  private async read(state: MeteredState): Promise<void> {
    const period = state.period;
    state.sinceRead = ZERO;
    try {
      const stored = await this.entitlements.usageOf(state.grant, period);
      if (state.period === period) state.usage = stored.plus(state.sinceRead);
    } finally {
      state.sinceRead = undefined;
      state.decision = decisionOf(state);
    }
  }

  /** Every metered state's usage from the store (what other processes and nodes committed). */
  private async refresh(): Promise<void> {
    if (this.refreshing || !this.ready) return;
    this.refreshing = true;
    try {
      const states = [...new Set(this.bySubject.values())].flatMap((e) => [...e.metered.values()]);
      const now = Date.now();
      for (const s of states) if (now >= s.period.to) this.startPeriod(s, now);
      for (let i = 0; i < states.length; i += REFRESH_CONCURRENCY) await Promise.all(states.slice(i, i + REFRESH_CONCURRENCY).map((s) => this.read(s)));
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
      void this.read(state).catch(() => undefined);
    }
  }

  /** Usage this process just committed: counted at once, before the next re-read. */
  private addLocal(readings: CommittedReading[]): void {
    for (const r of readings) {
      const entry = this.bySubject.get(r.subject);
      if (!entry) continue;
      for (const state of entry.metered.values()) {
        if (state.grant.meter?.id !== r.meterId || !ADDITIVE.has(state.aggregation) || !matches(state.grant.meter.filters, r.dimensions)) continue;
        const t = r.time * 1000;
        if (t >= state.period.to) this.startPeriod(state, t);
        if (t < state.period.from) continue;
        const amount = state.aggregation === 'count' ? 1 : r.value;
        if (amount === undefined) continue;
        state.usage = state.usage.plus(amount);
        if (state.sinceRead) state.sinceRead = state.sinceRead.plus(amount);
        state.decision = decisionOf(state);
      }
    }
  }
}
