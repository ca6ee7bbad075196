/**
 * The node's recent traffic, for the console's chart: requests by status class in fixed time buckets,
 * the last hour by 10 seconds and the last day by minute. Each process counts its own in rings of
 * buckets numbered from the epoch, so the rings of a node's processes add up bucket by bucket, whichever
 * process answers. A process's history starts when it does and ends with it.
 *
 * The last hour is also kept per route (the console's sparklines), for the routes of the configuration
 * only: a route's ring is made at its first request and dropped when a configuration without it is
 * applied, and requests that matched no route count for the node alone, so no client-chosen value
 * (a path, a host) can add a ring.
 */

export const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
type StatusClass = (typeof STATUS_CLASSES)[number];

/** The resolutions kept: a bucket's length and how many buckets (an hour and a day). */
export const RESOLUTIONS = { hour: { stepSeconds: 10, buckets: 360 }, day: { stepSeconds: 60, buckets: 1440 } } as const;
type ResolutionName = keyof typeof RESOLUTIONS;

/** One process's buckets that hold requests: [bucket number, count per status class]. */
type RingSnapshot = [bucket: number, counts: number[]][];
/** One process's rings: the node's two resolutions, and the hour of each route that had requests ([route label, ring]). */
export type HistorySnapshot = Record<ResolutionName, RingSnapshot> & { routes: [route: string, hour: RingSnapshot][] };

/** Requests per status class, `from` (epoch seconds) on, `step_seconds` apart; the last bucket is still filling. */
export interface TrafficSeries {
  step_seconds: number;
  from: number;
  requests: Record<StatusClass, number[]>;
}

/** One route's requests per status class over the hour (the hour series' `from` and `step_seconds`). */
export interface RouteSeries {
  route: string;
  requests: Record<StatusClass, number[]>;
}

function statusClass(code: number): number {
  return Math.min(Math.max(Math.floor(code / 100) - 1, 0), STATUS_CLASSES.length - 1);
}

class BucketRing {
  private readonly stepMs: number;
  /** The bucket number each slot holds (-1: none yet); minutes since the epoch fit 32 bits for millennia. */
  private readonly held: Int32Array;
  /** 32 bits a count: 8.6 KB an hour's ring, which matters once every route has one. */
  private readonly counts: Uint32Array;

  constructor(stepSeconds: number, private readonly size: number) {
    this.stepMs = stepSeconds * 1000;
    this.held = new Int32Array(size).fill(-1);
    this.counts = new Uint32Array(size * STATUS_CLASSES.length);
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

const hourRing = () => new BucketRing(RESOLUTIONS.hour.stepSeconds, RESOLUTIONS.hour.buckets);

export class TrafficHistory {
  private readonly hour = hourRing();
  private readonly day = new BucketRing(RESOLUTIONS.day.stepSeconds, RESOLUTIONS.day.buckets);
  /** The hour of each configured route that had a request since the configuration was applied. */
  private readonly routes = new Map<string, BucketRing>();
  /** The labels of the configuration's routes: the only ones that get a ring. */
  private configured = new Set<string>();

  /** Called for every request (`route` '': it matched none): three counter increments, nothing allocated but a route's first ring. */
  record(code: number, route: string, nowMs = Date.now()): void {
    this.hour.add(nowMs, code);
    this.day.add(nowMs, code);
    this.routeRing(route)?.add(nowMs, code);
  }

  private routeRing(route: string): BucketRing | undefined {
    let ring = this.routes.get(route);
    // A request still in flight when its route left the configuration makes no ring.
    if (!ring && this.configured.has(route)) this.routes.set(route, (ring = hourRing()));
    return ring;
  }

  /** The labels of the routes of the configuration now applied: the rings of the others go. */
  keepRoutes(labels: Iterable<string>): void {
    this.configured = new Set(labels);
    for (const route of this.routes.keys()) if (!this.configured.has(route)) this.routes.delete(route);
  }

  /** The configured routes' labels, in the configuration's order. */
  configuredRoutes(): string[] {
    return [...this.configured];
  }

  snapshot(): HistorySnapshot {
    return { hour: this.hour.snapshot(), day: this.day.snapshot(), routes: [...this.routes].map(([route, ring]) => [route, ring.snapshot()]) };
  }
}

/** Requests per status class of one resolution's buckets ending with the bucket of `nowMs`, summed over rings of several processes. */
function sumRings(rings: RingSnapshot[], name: ResolutionName, nowMs: number): Record<StatusClass, number[]> {
  const { stepSeconds, buckets } = RESOLUTIONS[name];
  const last = Math.floor(nowMs / (stepSeconds * 1000));
  const first = last - buckets + 1;
  const requests = Object.fromEntries(STATUS_CLASSES.map((c) => [c, new Array<number>(buckets).fill(0)])) as Record<StatusClass, number[]>;
  for (const ring of rings) {
    for (const [bucket, counts] of ring) {
      if (bucket < first || bucket > last) continue;
      STATUS_CLASSES.forEach((c, k) => (requests[c][bucket - first] += counts[k]));
    }
  }
  return requests;
}

/** The series of one resolution ending with the bucket of `nowMs`, summed over the processes' snapshots. */
export function sumHistories(snapshots: HistorySnapshot[], name: ResolutionName, nowMs: number): TrafficSeries {
  const stepSeconds = RESOLUTIONS[name].stepSeconds;
  const first = Math.floor(nowMs / (stepSeconds * 1000)) - RESOLUTIONS[name].buckets + 1;
  return { step_seconds: stepSeconds, from: first * stepSeconds, requests: sumRings(snapshots.map((s) => s[name]), name, nowMs) };
}

/**
 * Each route's hour ending with the bucket of `nowMs`, summed over the processes' snapshots, in the
 * order of `labels` (the answering process's configuration: while a reload reaches the processes one by
 * one, the routes only another one has are left out), for the routes with requests in that hour.
 */
export function sumRouteHistories(snapshots: HistorySnapshot[], labels: readonly string[], nowMs: number): RouteSeries[] {
  const rings = new Map<string, RingSnapshot[]>();
  for (const snapshot of snapshots) {
    for (const [route, ring] of snapshot.routes) rings.set(route, [...(rings.get(route) ?? []), ring]);
  }
  const series: RouteSeries[] = [];
  for (const route of labels) {
    if (!rings.has(route)) continue;
    const requests = sumRings(rings.get(route) ?? [], 'hour', nowMs);
    if (Object.values(requests).some((counts) => counts.some((n) => n > 0))) series.push({ route, requests });
  }
  return series;
}
