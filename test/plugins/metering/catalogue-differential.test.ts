/**
 * The catalogue's aggregation and query rules (§7.5, §7.6: value parsing, `from` inclusive / `to` exclusive,
 * clock-aligned windows in a time zone, only non-empty windows, totals bounded by from/to or by each group's
 * first and last minute, grouping and dimension filters) checked against a plain model on a seeded random
 * history: every aggregation, many random ranges, granularities, zones and groupings. The gateway keeps
 * roll-ups; the model reads raw events, so any disagreement is a roll-up or windowing bug.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { seeded } from '../../helpers/random.ts';
import { DAY, event, HOUR, iso, MeteringApi, meteringConfig, MINUTE, utcDayAgo, type QueryResult } from './catalogue-support.ts';

const random = seeded(20261122);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
const between = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo));

const TYPE = 'differential';
const AGGREGATIONS = ['sum', 'count', 'avg', 'min', 'max', 'unique_count', 'latest'] as const;
type Aggregation = (typeof AGGREGATIONS)[number];
const ZONES = ['UTC', 'America/Los_Angeles', 'Europe/Budapest', 'Asia/Kolkata', 'Asia/Tokyo'];
const MISSING = Symbol('missing');

interface ModelEvent {
  time: number;
  subject: string;
  value: unknown;
  region: unknown;
}

/** History: 70 days back to yesterday, part of it clustered inside a few minutes and hours (sub-window edges). */
const END = utcDayAgo(1).getTime();
const START = END - 70 * DAY;
function randomTime(): number {
  const cluster = random() < 0.3 ? START + 35 * DAY + between(0, 3 * HOUR) : between(START, END);
  return Math.floor(cluster / 1000) * 1000;
}
const seconds = new Set<number>();
const EVENTS: ModelEvent[] = [];
while (EVENTS.length < 500) {
  const time = randomTime();
  if (seconds.has(time)) continue; // distinct times: `latest` ties are arbitrary upstream
  seconds.add(time);
  EVENTS.push({
    time,
    subject: pick(['s1', 's2', 's3']),
    // Quarters are exact in binary floating point, so sums do not depend on the order of addition.
    value: pick([() => between(-20, 100), () => String(between(0, 400) / 4), () => 'abc', () => null, () => MISSING, () => true])(),
    region: pick(['eu', 'us', 'ap', MISSING, 7]),
  });
}

const meterKey = (aggregation: Aggregation) => `diff_${aggregation}`;
const METERS = AGGREGATIONS.map((aggregation) => ({
  key: meterKey(aggregation),
  name: aggregation,
  event_type: TYPE,
  aggregation,
  ...(aggregation === 'count' ? {} : { value_property: '$.value' }),
  dimensions: { region: '$.region' },
}));

let gateway: TestGateway;
let api: MeteringApi;

before(async () => {
  gateway = await startGateway(meteringConfig({ meters: METERS }));
  api = await MeteringApi.connect(gateway.https);
  const wire = EVENTS.map((e) => {
    const data: Record<string, unknown> = {};
    if (e.value !== MISSING) data.value = e.value;
    if (e.region !== MISSING) data.region = e.region;
    return event({ type: TYPE, subject: e.subject, time: iso(e.time), data });
  });
  for (let i = 0; i < wire.length; i += 100) await api.ingestOk(wire.slice(i, i + 100));
  await api.totalWhen(meterKey('count'), EVENTS.length);
});
after(() => gateway?.stop());

// ---- the model ----

/** ClickHouse JSON_VALUE text of a scalar; objects, arrays and missing are ''. */
function text(value: unknown): string {
  if (value === MISSING || (typeof value === 'object' && value !== null)) return '';
  return value === null ? 'null' : String(value);
}
function numeric(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value === 'string' && /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value)) return Number(value);
  return undefined;
}

const formats = new Map<string, Intl.DateTimeFormat>();
function localParts(t: number, zone: string) {
  let format = formats.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' });
    formats.set(zone, format);
  }
  const parts = Object.fromEntries(format.formatToParts(new Date(t)).map((p) => [p.type, Number(p.value)]));
  return { y: parts.year, mo: parts.month, d: parts.day, h: parts.hour, mi: parts.minute, s: parts.second };
}
/** The instant at which the wall clock of `zone` shows y-mo-d 00:00 (it exists in the zones used here). */
function localMidnight(y: number, mo: number, d: number, zone: string): number {
  const wall = Date.UTC(y, mo - 1, d);
  let guess = wall;
  for (let i = 0; i < 4; i++) {
    const p = localParts(guess, zone);
    guess += wall - Date.UTC(p.y, p.mo - 1, p.d, p.h, p.mi, p.s);
  }
  return guess;
}
function windowOf(t: number, granularity: string, zone: string): [number, number] {
  const p = localParts(t, zone);
  switch (granularity) {
    case 'PT1M':
      return [t - p.s * 1000, t - p.s * 1000 + MINUTE];
    case 'PT1H': {
      const start = t - (p.mi * 60 + p.s) * 1000;
      return [start, start + HOUR];
    }
    case 'P1D': {
      const next = new Date(Date.UTC(p.y, p.mo - 1, p.d + 1));
      return [localMidnight(p.y, p.mo, p.d, zone), localMidnight(next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate(), zone)];
    }
    default: {
      const next = new Date(Date.UTC(p.y, p.mo, 1));
      return [localMidnight(p.y, p.mo, 1, zone), localMidnight(next.getUTCFullYear(), next.getUTCMonth() + 1, 1, zone)];
    }
  }
}

interface Query {
  from?: number;
  to?: number;
  granularity?: string;
  time_zone: string;
  group_by_dimensions: string[];
  region?: string;
}

function aggregate(aggregation: Aggregation, events: ModelEvent[]): number | undefined {
  if (aggregation === 'count') return events.length;
  if (aggregation === 'unique_count') return new Set(events.filter((e) => e.value !== null).map((e) => text(e.value))).size;
  const usable = events.filter((e) => numeric(e.value) !== undefined);
  if (usable.length === 0) return undefined;
  const values = usable.map((e) => numeric(e.value)!);
  switch (aggregation) {
    case 'sum':
      return values.reduce((a, b) => a + b, 0);
    case 'avg':
      return values.reduce((a, b) => a + b, 0) / values.length;
    case 'min':
      return Math.min(...values);
    case 'max':
      return Math.max(...values);
    default:
      return numeric(usable.reduce((a, b) => (b.time > a.time ? b : a)).value);
  }
}

function expected(aggregation: Aggregation, query: Query): string[] {
  const matching = EVENTS.filter(
    (e) =>
      (query.from === undefined || e.time >= query.from) &&
      (query.to === undefined || e.time < query.to) &&
      (query.region === undefined || text(e.region) === query.region),
  );
  const groups = new Map<string, { window?: [number, number]; dimensions: Record<string, string>; events: ModelEvent[] }>();
  for (const e of matching) {
    const window = query.granularity ? windowOf(e.time, query.granularity, query.time_zone) : undefined;
    const dimensions = Object.fromEntries(query.group_by_dimensions.map((d) => [d, d === 'subject' ? e.subject : text(e.region)]));
    const key = JSON.stringify([window, dimensions]);
    const group = groups.get(key) ?? { window, dimensions, events: [] };
    group.events.push(e);
    groups.set(key, group);
  }
  const rows: string[] = [];
  for (const group of groups.values()) {
    const value = aggregate(aggregation, group.events);
    if (value === undefined) continue;
    const times = group.events.map((e) => e.time);
    const floorMinute = (t: number) => t - (t % MINUTE);
    const [from, to] = group.window ?? [query.from ?? floorMinute(Math.min(...times)), query.to ?? floorMinute(Math.max(...times)) + MINUTE];
    rows.push(describeRow(from, to, group.dimensions, value));
  }
  if (rows.length === 0 && !query.granularity && query.group_by_dimensions.length === 0 && (aggregation === 'count' || aggregation === 'unique_count')) {
    // As ClickHouse: an aggregate without GROUP BY has a row; its bounds are the epoch when not given.
    rows.push(describeRow(query.from ?? 0, query.to ?? 0, {}, 0));
  }
  return rows.sort();
}

function describeRow(from: number, to: number, dimensions: Record<string, string>, value: number): string {
  return `${iso(from)} ${iso(to)} ${JSON.stringify(dimensions)} ${Number(value.toPrecision(12))}`;
}

function actual(result: QueryResult, query: Query): string[] {
  return result.data
    .map((row) => {
      const dimensions = Object.fromEntries(query.group_by_dimensions.map((d) => [d, row.dimensions[d]]));
      return describeRow(Date.parse(row.from), Date.parse(row.to), dimensions, Number(row.value));
    })
    .sort();
}

function randomQuery(): Query {
  const granularity = pick([undefined, 'PT1M', 'PT1H', 'P1D', 'P1M']);
  const query: Query = { time_zone: pick(ZONES), group_by_dimensions: pick([[], ['subject'], ['region'], ['subject', 'region']]) };
  if (granularity) query.granularity = granularity;
  const span = granularity === 'PT1M' ? between(MINUTE, 4 * HOUR) : between(MINUTE, 80 * DAY);
  const anchor = granularity === 'PT1M' ? START + 35 * DAY + between(-HOUR, 3 * HOUR) : between(START - 5 * DAY, END);
  const from = Math.floor(anchor / 1000) * 1000;
  if (granularity === 'PT1M' || random() < 0.8) query.from = from;
  if (granularity === 'PT1M' || random() < 0.8) query.to = from + Math.ceil(span / 1000) * 1000;
  if (random() < 0.2) query.region = pick(['eu', '', '7']);
  return query;
}

test('200 random queries over a random history agree with the model, for every aggregation', async () => {
  const disagreements: string[] = [];
  for (let i = 0; i < 200; i++) {
    const aggregation = AGGREGATIONS[i % AGGREGATIONS.length];
    const query = randomQuery();
    const body: Record<string, unknown> = { time_zone: query.time_zone, group_by_dimensions: query.group_by_dimensions };
    if (query.granularity) body.granularity = query.granularity;
    if (query.from !== undefined) body.from = iso(query.from);
    if (query.to !== undefined) body.to = iso(query.to);
    if (query.region !== undefined) body.filters = { dimensions: { region: { eq: query.region } } };
    const got = actual(await api.queryOk(meterKey(aggregation), body), query);
    const want = expected(aggregation, query);
    try {
      assert.deepEqual(got, want);
    } catch {
      disagreements.push(`${aggregation} ${JSON.stringify(body)}\n  got  ${got.join('\n       ')}\n  want ${want.join('\n       ')}`);
    }
  }
  assert.deepEqual(disagreements, []);
});
