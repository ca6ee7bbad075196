/**
 * The on-disk queue of events bound for a remote ingest endpoint, in the store, so that a restart
 * resumes it and every process sharing the store works on the same queue. Kong keeps its queue in
 * memory; the layout and the claims here are Tollgate's.
 *
 *   <queue>/e/<time ms>/<writer>/<seq>   one queued event (its CloudEvent JSON), oldest first
 *   <queue>/c/<claim id>                 a batch taken off the queue by one process: its events, the
 *                                        owner's lease, and its retry state
 *
 * Entries are created by one atomic write under keys no other process can name (the writer's own id),
 * and from then on only deleted through commitIf. A batch is claimed with one commitIf that deletes its entries and writes the claim, so two processes
 * never send the same entries; no process keeps a cursor of its own. The claim is deleted once the
 * endpoint acknowledged it. A process that dies holding a claim stops renewing its lease; when the lease
 * has run out any process takes the claim over and sends it again (receivers dedupe by source and id, so
 * a batch acknowledged just before the crash is harmless to resend).
 */
import { randomBytes } from 'node:crypto';
import type { Store } from '../../src/pipeline/plugin-api.ts';

export interface ClaimState {
  owner: string;
  /** Until then (ms) no other process may take the claim over. */
  lease_until: number;
  /** The next attempt is not made before this time (ms). */
  next_try: number;
  /** The first attempt (ms), for max_retry_time. */
  first_try: number;
  attempts: number;
  events: string[];
}

export interface Claim {
  key: string;
  /** The stored value the claim was read or written as: what the next commitIf expects. */
  stored: string;
  state: ClaimState;
}

export interface Depth {
  entries: number;
  bytes: number;
}

const TIME_WIDTH = 13;
const SEQ_WIDTH = 10;
/** How many times a claim is retried when another process took the same entries first. */
const CLAIM_TRIES = 5;

export class DiskQueue {
  private readonly entries: string;
  private readonly claims: string;
  private seq = 0;

  constructor(
    private readonly store: Store,
    name: string,
    /** This process, as writer of entries and owner of claims. */
    readonly owner: string = randomBytes(8).toString('hex'),
  ) {
    const root = `q/${encodeURIComponent(name)}/`;
    this.entries = root + 'e/';
    this.claims = root + 'c/';
  }

  /**
   * Appends events in one store write. Not fsynced: the write is in the operating system once this
   * resolves, so a crash of the gateway process loses none of it (a crash of the machine may).
   */
  async append(events: string[], now = Date.now()): Promise<void> {
    const batch = this.store.writeBatch();
    const time = String(now).padStart(TIME_WIDTH, '0');
    for (const event of events) batch.put(`${this.entries}${time}/${this.owner}/${String(++this.seq).padStart(SEQ_WIDTH, '0')}`, event);
    await batch.write();
  }

  /** Every queued entry, counted (events and their bytes). */
  async count(): Promise<Depth> {
    const depth = { entries: 0, bytes: 0 };
    for await (const [, value] of this.store.scan({ prefix: this.entries })) {
      depth.entries++;
      depth.bytes += value.length;
    }
    return depth;
  }

  /** The time (ms) the oldest entry was queued, or undefined when the queue is empty. */
  async oldest(): Promise<number | undefined> {
    for await (const [key] of this.store.scan({ prefix: this.entries, limit: 1 })) return Number(key.slice(this.entries.length, this.entries.length + TIME_WIDTH));
    return undefined;
  }

  /**
   * Takes up to `max` of the oldest entries off the queue into a claim owned by this process, leased
   * until `leaseUntil`: once `max` entries are there, or sooner when the oldest was queued before
   * `readyIf.olderThan` (ms). Undefined when there is nothing (yet) to take.
   */
  async claim(max: number, leaseUntil: number, readyIf: { olderThan: number }, now = Date.now()): Promise<Claim | undefined> {
    for (let attempt = 0; attempt < CLAIM_TRIES; attempt++) {
      const taken: [string, string][] = [];
      for await (const entry of this.store.scan({ prefix: this.entries, limit: max })) taken.push(entry);
      if (taken.length === 0) return undefined;
      const queuedAt = Number(taken[0][0].slice(this.entries.length, this.entries.length + TIME_WIDTH));
      if (taken.length < max && queuedAt > readyIf.olderThan) return undefined;
      const state: ClaimState = { owner: this.owner, lease_until: leaseUntil, next_try: now, first_try: now, attempts: 0, events: taken.map(([, v]) => v) };
      const key = `${this.claims}${String(now).padStart(TIME_WIDTH, '0')}-${this.owner}-${++this.seq}`;
      const stored = JSON.stringify(state);
      const ok = await this.store.commitIf(
        taken.map(([k, value]) => ({ key: k, value })),
        [...taken.map(([k]) => ({ type: 'del' as const, key: k })), { type: 'put' as const, key, value: stored }],
      );
      if (ok) return { key, stored, state };
    }
    return undefined;
  }

  /** Claims whose owner's lease ran out and whose next attempt is due, taken over by this process. */
  async takeOverExpired(leaseUntil: number, now = Date.now()): Promise<Claim[]> {
    const taken: Claim[] = [];
    for await (const [key, value] of this.store.scan({ prefix: this.claims })) {
      const state = JSON.parse(value) as ClaimState;
      if (state.lease_until > now || state.next_try > now) continue;
      const claim = await this.update({ key, stored: value, state }, { owner: this.owner, lease_until: leaseUntil });
      if (claim) taken.push(claim);
    }
    return taken;
  }

  /** Rewrites a claim this process holds; undefined when another process took it over meanwhile. */
  async update(claim: Claim, changes: Partial<ClaimState>): Promise<Claim | undefined> {
    const state = { ...claim.state, ...changes };
    const stored = JSON.stringify(state);
    const ok = await this.store.commitIf([{ key: claim.key, value: claim.stored }], [{ type: 'put', key: claim.key, value: stored }]);
    return ok ? { key: claim.key, stored, state } : undefined;
  }

  /** Deletes a claim (delivered, or given up); false when another process had taken it over. */
  complete(claim: Claim): Promise<boolean> {
    return this.store.commitIf([{ key: claim.key, value: claim.stored }], [{ type: 'del', key: claim.key }]);
  }

  /** Deletes up to `count` of the oldest entries (a full queue); returns how many. */
  async dropOldest(count: number): Promise<number> {
    const oldest: [string, string][] = [];
    for await (const entry of this.store.scan({ prefix: this.entries, limit: count })) oldest.push(entry);
    if (oldest.length === 0) return 0;
    const ok = await this.store.commitIf(
      oldest.map(([key, value]) => ({ key, value })),
      oldest.map(([key]) => ({ type: 'del' as const, key })),
    );
    return ok ? oldest.length : 0;
  }
}
