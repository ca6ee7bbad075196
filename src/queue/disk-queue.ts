/**
 * The on-disk queue of events bound for a remote ingest endpoint, in the store, so that a restart
 * resumes it and every process sharing the store works on the same queue. Kong keeps its queue in
 * memory; the layout and the claims here are Tollgate's.
 *
 *   <queue>/e/<time ms>/<writer>/<seq>   a chunk of queued events (CloudEvent JSON, one per line), oldest first
 *                                        (time 0: re-delivered dead letters, sent before the rest)
 *   <queue>/c/<claim id>                 a batch taken off the queue by one process: the owner's lease and the retry state
 *   <queue>/b/<claim id>                 that batch's events
 *
 * Events are queued in chunks (what requests produced in a few milliseconds, at most a batch each), so the
 * queue costs a few store operations per chunk, not per event. Chunks are created by one atomic write
 * under keys no other process can name (the writer's own id), and from then on only changed through
 * commitIf. A batch is claimed with one commitIf that deletes its chunks and writes the claim, so two
 * processes never send the same events; no process keeps a cursor of its own. The claim is deleted once
 * the endpoint acknowledged it, or replaced in the same commitIf: by claims of its parts (a batch split
 * to isolate refused events) or by a dead letter (dead-letters.ts). A process that dies holding a claim
 * stops renewing its lease; when the lease has run out any process takes the claim over and sends it
 * again (receivers dedupe by source and id, so a batch acknowledged just before the crash is harmless to
 * resend).
 */
import { randomBytes } from 'node:crypto';
import type { BatchOp, Store } from '../store/store.ts';

export interface ClaimState {
  owner: string;
  /** Until then (ms) no other process may take the claim over. */
  lease_until: number;
  /** The next attempt is not made before this time (ms). */
  next_try: number;
  /** The first attempt (ms), for max_retry_time. */
  first_try: number;
  attempts: number;
  /** Events in the batch. */
  count: number;
}

export interface Claim {
  id: string;
  /** The stored state the claim was read or written as: what the next commitIf expects. */
  stored: string;
  state: ClaimState;
  /** The batch's events, one JSON per line. */
  events: string;
}

export interface Depth {
  events: number;
  bytes: number;
}

const TIME_WIDTH = 13;
const SEQ_WIDTH = 10;
/** How many times a claim is retried when another process took the same chunks first. */
const CLAIM_TRIES = 5;

/** Events in a chunk (one per line: JSON text never holds a raw line feed). */
export function eventsIn(chunk: string): number {
  let lines = 1;
  for (let at = chunk.indexOf('\n'); at !== -1; at = chunk.indexOf('\n', at + 1)) lines++;
  return lines;
}

export class DiskQueue {
  private readonly chunks: string;
  private readonly claims: string;
  private readonly bodies: string;
  private seq = 0;

  constructor(
    private readonly store: Store,
    name: string,
    /** This process, as writer of chunks and owner of claims. */
    readonly owner: string = randomBytes(8).toString('hex'),
  ) {
    const root = `q/${encodeURIComponent(name)}/`;
    this.chunks = root + 'e/';
    this.claims = root + 'c/';
    this.bodies = root + 'b/';
  }

  private timeOf(chunkKey: string): number {
    return Number(chunkKey.slice(this.chunks.length, this.chunks.length + TIME_WIDTH));
  }

  /**
   * Appends events (JSON each) in chunks of at most `chunkSize`, in one store write. Not fsynced: the
   * write is in the operating system once this resolves, so a crash of the gateway process loses none
   * of it (a crash of the machine may).
   */
  async append(events: string[], chunkSize: number, now = Date.now()): Promise<void> {
    const batch = this.store.writeBatch();
    for (let i = 0; i < events.length; i += chunkSize) {
      const { key, value } = this.chunk(events.slice(i, i + chunkSize).join('\n'), now);
      batch.put(key, value);
    }
    await batch.write();
  }

  /** Every queued event, counted (events and their bytes). */
  async count(): Promise<Depth> {
    const depth = { events: 0, bytes: 0 };
    for await (const [, chunk] of this.store.scan({ prefix: this.chunks })) {
      depth.events += eventsIn(chunk);
      depth.bytes += chunk.length;
    }
    return depth;
  }

  /** The time (ms) the oldest chunk was queued, or undefined when the queue is empty. */
  async oldest(): Promise<number | undefined> {
    for await (const [key] of this.store.scan({ prefix: this.chunks, limit: 1 })) return this.timeOf(key);
    return undefined;
  }

  /**
   * The oldest chunks holding up to `max` events in all (at least one chunk, whatever its size), and
   * with `crossing` the chunk that crosses `max` too.
   */
  private async head(max: number, crossing = false): Promise<{ taken: [string, string][]; events: number }> {
    const taken: [string, string][] = [];
    let events = 0;
    for await (const [key, chunk] of this.store.scan({ prefix: this.chunks })) {
      const count = eventsIn(chunk);
      if (taken.length > 0 && events + count > max && !crossing) break;
      taken.push([key, chunk]);
      events += count;
      if (events >= max) break;
    }
    return { taken, events };
  }

  /**
   * Takes up to `max` of the oldest events off the queue into a claim owned by this process, leased
   * until `leaseUntil`: once `max` events are there, or sooner when the oldest was queued before
   * `readyIf.olderThan` (ms). Undefined when there is nothing (yet) to take.
   */
  async claim(max: number, leaseUntil: number, readyIf: { olderThan: number }, now = Date.now()): Promise<Claim | undefined> {
    for (let attempt = 0; attempt < CLAIM_TRIES; attempt++) {
      const { taken, events: count } = await this.head(max);
      if (taken.length === 0) return undefined;
      if (count < max && this.timeOf(taken[0][0]) > readyIf.olderThan) return undefined;
      const claim = this.newClaim(taken.map(([, chunk]) => chunk).join('\n'), count, { leaseUntil, now, firstTry: now });
      const ok = await this.store.commitIf(
        taken.map(([key, value]) => ({ key, value })),
        [...taken.map(([key]) => ({ type: 'del' as const, key })), ...this.claimOps(claim)],
      );
      if (ok) return claim;
    }
    return undefined;
  }

  /** Claims whose owner's lease ran out and whose next attempt is due, taken over by this process. */
  async takeOverExpired(leaseUntil: number, now = Date.now()): Promise<Claim[]> {
    const expired: [string, string][] = [];
    for await (const [key, stored] of this.store.scan({ prefix: this.claims })) {
      const state = JSON.parse(stored) as ClaimState;
      if (state.lease_until <= now && state.next_try <= now) expired.push([key.slice(this.claims.length), stored]);
    }
    const taken: Claim[] = [];
    for (const [id, stored] of expired) {
      const events = await this.store.get(this.bodies + id);
      if (events === undefined) continue;
      const claim = await this.update({ id, stored, state: JSON.parse(stored) as ClaimState, events }, { owner: this.owner, lease_until: leaseUntil });
      if (claim) taken.push(claim);
    }
    return taken;
  }

  /** Rewrites the state of a claim this process holds; undefined when another process took it over meanwhile. */
  async update(claim: Claim, changes: Partial<ClaimState>): Promise<Claim | undefined> {
    const state = { ...claim.state, ...changes };
    const stored = JSON.stringify(state);
    const ok = await this.store.commitIf([{ key: this.claims + claim.id, value: claim.stored }], [{ type: 'put', key: this.claims + claim.id, value: stored }]);
    return ok ? { ...claim, stored, state } : undefined;
  }

  /**
   * Deletes a claim and its events (delivered), applying `replacement` in the same step (a dead letter);
   * false when another process had taken it over.
   */
  complete(claim: Claim, replacement: BatchOp[] = []): Promise<boolean> {
    return this.store.commitIf(
      [{ key: this.claims + claim.id, value: claim.stored }],
      [{ type: 'del', key: this.claims + claim.id }, { type: 'del', key: this.bodies + claim.id }, ...replacement],
    );
  }

  /**
   * Replaces a claim by one claim per part (each a list of its events), held by this process until
   * `leaseUntil`, in one step; undefined when another process had taken the claim over. The parts keep
   * the claim's first attempt, so max_retry_time still counts from it.
   */
  async split(claim: Claim, parts: string[][], leaseUntil: number, now = Date.now()): Promise<Claim[] | undefined> {
    const claims = parts.map((part) => this.newClaim(part.join('\n'), part.length, { leaseUntil, now, firstTry: claim.state.first_try }));
    return (await this.complete(claim, claims.flatMap((c) => this.claimOps(c)))) ? claims : undefined;
  }

  /** The write that puts `events` (one JSON per line) back ahead of every queued event: sent first. */
  headChunk(events: string): BatchOp {
    return this.chunk(events, 0);
  }

  /** The write that queues `events` (one JSON per line) as one chunk queued at `now` (ms), for a write of the caller's. */
  chunk(events: string, now: number): BatchOp & { type: 'put' } {
    return { type: 'put', key: `${this.chunks}${String(now).padStart(TIME_WIDTH, '0')}/${this.owner}/${String(++this.seq).padStart(SEQ_WIDTH, '0')}`, value: events };
  }

  private newClaim(events: string, count: number, at: { leaseUntil: number; now: number; firstTry: number }): Claim {
    const state: ClaimState = { owner: this.owner, lease_until: at.leaseUntil, next_try: at.now, first_try: at.firstTry, attempts: 0, count };
    const id = `${String(at.now).padStart(TIME_WIDTH, '0')}-${this.owner}-${++this.seq}`;
    return { id, stored: JSON.stringify(state), state, events };
  }

  private claimOps(claim: Claim): BatchOp[] {
    return [
      { type: 'put', key: this.claims + claim.id, value: claim.stored },
      { type: 'put', key: this.bodies + claim.id, value: claim.events },
    ];
  }

  /** Deletes up to `count` of the oldest events (a full queue); returns how many went. */
  async dropOldest(count: number): Promise<number> {
    const { taken, events } = await this.head(count, true);
    if (taken.length === 0) return 0;
    const ops: { type: 'put' | 'del'; key: string; value?: string }[] = taken.map(([key]) => ({ type: 'del', key }));
    let dropped = events;
    if (events > count) {
      // The last chunk goes only in part: it is rewritten without its oldest events.
      const [key, chunk] = taken[taken.length - 1];
      const lines = chunk.split('\n');
      const keep = events - count;
      ops[ops.length - 1] = { type: 'put', key, value: lines.slice(lines.length - keep).join('\n') };
      dropped = count;
    }
    const ok = await this.store.commitIf(
      taken.map(([key, value]) => ({ key, value })),
      ops.map((op) => (op.type === 'del' ? { type: 'del' as const, key: op.key } : { type: 'put' as const, key: op.key, value: op.value! })),
    );
    return ok ? dropped : 0;
  }
}
