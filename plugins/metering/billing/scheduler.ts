/**
 * The billing scheduler: the time-driven jobs of every subscription, from its `schedule/<id>` record
 * (what has been done so far), so they survive restarts and catch up whatever came due while the
 * gateway was down:
 * - issue the in-advance invoice of each period at its start;
 * - issue the in-arrears invoice of each period once it has ended and the collection period passed;
 * - announce each usage-period reset of metered entitlements (caches on every node drop the usage
 *   they hold for that customer; the reset itself is computed from time, so a late announcement
 *   never delays it).
 * Each job is idempotent: an invoice is written only if absent, in the same commit that moves the
 * schedule on. A lease in the store lets one process of those sharing it do the work; the others
 * stand by (and would only repeat harmless no-ops if two ever ran at once).
 */
import type { Logger } from 'pino';
import { formatInstant, type Instant } from './shared/calendar.ts';
import { grantsOf, usagePeriodAt } from './entitlement/port.ts';
import type { InvoiceKind, InvoiceService } from './invoice/port.ts';
import { CHANGES_TOPIC, keys, Lease, PREFIXES, RESETS_TOPIC, type BillingStore, type Transaction } from './shared/store.ts';
import { billingPeriod, type Subscription } from './subscription/port.ts';

interface ScheduleState {
  /** Next period whose in-advance invoice is due. */
  advance: number;
  /** Next period whose in-arrears invoice is due. */
  arrears: number;
  /** Usage-period resets up to this instant have been announced. */
  resets_until: string;
}

const TICK_MS = 500;
const LEASE_MS = 5_000;

export class Scheduler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;
  private unsubscribe: () => void = () => undefined;
  private readonly lease: Lease;
  /** How long after a period's end its usage is frozen into the issued invoice, ms. */
  collectionMs = 3_600_000;

  constructor(
    private readonly db: BillingStore,
    private readonly invoices: InvoiceService,
    private readonly log: Logger,
  ) {
    this.lease = new Lease(db.store, keys.lease('scheduler'), LEASE_MS);
  }

  start(): void {
    this.timer = setInterval(() => this.kick(), TICK_MS);
    this.timer.unref();
    // A new subscription may owe an in-advance invoice at once.
    this.unsubscribe = this.db.store.notices.subscribe(CHANGES_TOPIC, (what) => (what === 'subscription' ? this.kick() : undefined));
    this.kick();
  }

  /** Runs a pass soon (after the one in progress). */
  kick(): void {
    if (this.stopped) return;
    this.running = this.running.then(() => this.pass(Date.now())).catch((err) => this.log.error({ err }, 'billing: scheduler pass failed; retrying'));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.unsubscribe();
    await this.running;
    await this.lease.release();
  }

  /** One pass over every subscription with work left; resolves when all due jobs are done. */
  async pass(now: Instant): Promise<void> {
    if (!(await this.lease.hold())) return;
    for await (const [key] of this.db.store.scan({ prefix: PREFIXES.schedules })) {
      if (this.stopped) return;
      const id = key.slice(PREFIXES.schedules.length);
      const s = await this.db.get<Subscription>(keys.subscription(id));
      try {
        if (s) await this.runDue(s, now);
      } catch (err) {
        // One subscription's failure (e.g. a meter still backfilling) must not hold up the others.
        this.log.warn({ err, subscription: id }, 'billing: a scheduled job failed; it is retried on the next pass');
      }
    }
  }

  private async runDue(s: Subscription, now: Instant): Promise<void> {
    for (;;) {
      const state = await this.db.get<ScheduleState>(keys.schedule(s.id));
      if (!state) return;
      const advance = billingPeriod(s, state.advance);
      const arrears = billingPeriod(s, state.arrears);
      if (advance && advance.from <= now) await this.issue(s, 'in_advance', state.advance, now);
      else if (arrears && arrears.to + this.collectionMs <= now) await this.issue(s, 'in_arrears', state.arrears, now);
      else if (!advance && !arrears) return this.finish(s);
      else return this.announceResets(s, state, now);
    }
  }

  /** Issues one invoice (or records that the period has none) and moves the schedule on, in one commit. */
  private async issue(s: Subscription, kind: InvoiceKind, index: number, now: Instant): Promise<void> {
    const period = billingPeriod(s, index)!;
    const draft = await this.invoices.compute(s, period, kind, 'issued');
    const field = kind === 'in_advance' ? 'advance' : 'arrears';
    const moveOn = async (tx: Transaction) => {
      const state = await tx.get<ScheduleState>(keys.schedule(s.id));
      if (state && state[field] === index) tx.put(keys.schedule(s.id), { ...state, [field]: index + 1 });
    };
    if (draft.lines.length === 0) return void (await this.db.transact(moveOn, 'schedule'));
    if (await this.invoices.issue(draft, moveOn)) {
      this.log.info({ invoice: draft.id, subscription: s.id, period: draft.period, total: draft.totals.total, late_ms: now - period.to }, 'billing: invoice issued');
    }
  }

  /** Every invoice of an ended subscription is out: nothing is left to schedule. */
  private finish(s: Subscription): Promise<void> {
    return this.db.transact(async (tx) => {
      if (await tx.text(keys.schedule(s.id))) tx.del(keys.schedule(s.id));
    }, 'schedule');
  }

  /** Announces the latest usage-period reset of the subscription's metered entitlements, once. */
  private async announceResets(s: Subscription, state: ScheduleState, now: Instant): Promise<void> {
    const metered = grantsOf(s).filter((g) => g.type === 'metered');
    if (metered.length === 0) return;
    const latest = Math.max(...metered.map((g) => usagePeriodAt(g, now).from));
    if (latest <= Date.parse(state.resets_until)) return;
    await this.db.transact(async (tx) => {
      const current = await tx.get<ScheduleState>(keys.schedule(s.id));
      if (current && Date.parse(current.resets_until) < latest) tx.put(keys.schedule(s.id), { ...current, resets_until: formatInstant(latest) });
    }, 'schedule');
    this.db.store.notices.publish(RESETS_TOPIC, s.customer.id);
  }
}
