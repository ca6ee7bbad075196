/**
 * The node's recent traffic, for the console's chart: requests by status class in fixed time buckets,
 * the last hour by 10 seconds and the last day by minute. Each process counts its own in rings of
 * buckets numbered from the epoch, so the rings of a node's processes add up bucket by bucket, whichever
 * process answers. A process's history starts when it does and ends with it.
 */

export const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
type StatusClass = (typeof STATUS_CLASSES)[number];

/** The resolutions kept: a bucket's length and how many buckets (an hour and a day). */
export const RESOLUTIONS = { hour: { stepSeconds: 10, buckets: 360 }, day: { stepSeconds: 60, buckets: 1440 } } as const;
type ResolutionName = keyof typeof RESOLUTIONS;

/** One process's buckets that hold requests: [bucket number, count per status class]. */
type RingSnapshot = [bucket: number, counts: number[]][];
export type HistorySnapshot = Record<ResolutionName, RingSnapshot>;

/** Requests per status class, `from` (epoch seconds) on, `step_seconds` apart; the last bucket is still filling. */
export interface TrafficSeries {
  step_seconds: number;
  from: number;
  requests: Record<StatusClass, number[]>;
}

function statusClass(code: number): number {
  return Math.min(Math.max(Math.floor(code / 100) - 1, 0), STATUS_CLASSES.length - 1);
}

class BucketRing {
  private readonly stepMs: number;
  /** The bucket number each slot holds (-1: none yet). */
  private readonly held: Float64Array;
  private readonly counts: Float64Array;

  constructor(stepSeconds: number, private readonly size: number) {
    this.stepMs = stepSeconds * 1000;
    this.held = new Float64Array(size).fill(-1);
    this.counts = new Float64Array(size * STATUS_CLASSES.length);
  }

  bucketAt(nowMs: number): number {
    return Math.floor(nowMs / this.stepMs);
  }

  add(nowMs: number, code: number): void {
    const bucket = this.bucketAt(nowMs);
    const slot = bucket % this.size;
    const offset = slot * STATUS_CLASSES.length;
    // A slot still holding a bucket of a lap ago starts over.
    if (this.held[slot] !== bucket) {
      this.held[slot] = bucket;
      this.counts.fill(0, offset, offset + STATUS_CLASSES.length);
    }
    this.counts[offset + statusClass(code)]++;
  }

  snapshot(): RingSnapshot {
    const out: RingSnapshot = [];
    for (let slot = 0; slot < this.size; slot++) {
      if (this.held[slot] < 0) continue;
      const offset = slot * STATUS_CLASSES.length;
      out.push([this.held[slot], [...this.counts.subarray(offset, offset + STATUS_CLASSES.length)]]);
    }
    return out;
  }
}

export class TrafficHistory {
  private readonly hour = new BucketRing(RESOLUTIONS.hour.stepSeconds, RESOLUTIONS.hour.buckets);
  private readonly day = new BucketRing(RESOLUTIONS.day.stepSeconds, RESOLUTIONS.day.buckets);

  /** Called for every request: two counter increments, nothing allocated. */
  record(code: number, nowMs = Date.now()): void {
    this.hour.add(nowMs, code);
    this.day.add(nowMs, code);
  }

  snapshot(): HistorySnapshot {
    return { hour: this.hour.snapshot(), day: this.day.snapshot() };
  }
}

/** The series of one resolution ending with the bucket of `nowMs`, summed over the processes' snapshots. */
export function sumHistories(snapshots: HistorySnapshot[], name: ResolutionName, nowMs: number): TrafficSeries {
  const { stepSeconds, buckets } = RESOLUTIONS[name];
  const last = Math.floor(nowMs / (stepSeconds * 1000));
  const first = last - buckets + 1;
  const requests = Object.fromEntries(STATUS_CLASSES.map((c) => [c, new Array<number>(buckets).fill(0)])) as Record<StatusClass, number[]>;
  for (const snapshot of snapshots) {
    for (const [bucket, counts] of snapshot[name]) {
      if (bucket < first || bucket > last) continue;
      STATUS_CLASSES.forEach((c, k) => (requests[c][bucket - first] += counts[k]));
    }
  }
  return { step_seconds: stepSeconds, from: first * stepSeconds, requests };
}
