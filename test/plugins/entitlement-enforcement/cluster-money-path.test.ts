/**
 * The money-path property: on one process, on a node of 2 workers and on 2 PostgreSQL nodes, a seeded
 * random mix of requests — admitted and refused (bad keys, rate-limited, over a hard limit), long URIs,
 * bursts of up to 200 concurrent requests at a limit — and of posted events (duplicates of request
 * events, events dated 40 days ahead and back), over two usage periods, with the gateway stopped by
 * SIGTERM or SIGINT to its whole process group (once or twice) and crashed by kill -9 (a worker, or the
 * whole node after a quiet second) in between. Afterwards, for every customer and period:
 *   - the requests answered 200 are at most the limit;
 *   - the meter counts exactly those requests (no answered request missing, none refused counted);
 *   - the invoice line (issued for the first period, upcoming for the second) bills exactly them.
 * The seed is in the test's name; MONEY_PATH_SEED=<seed> runs the same mix again.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { request, spawnGateway, startUpstream, tempDir, type Reply, type SpawnedGateway } from '../../helpers/gateway.ts';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from '../../helpers/postgres.ts';
import { seeded } from '../../helpers/random.ts';
import { waitFor } from '../../helpers/support.ts';
import { anchorEndingIn, BillingApi, billingConfig, sleep } from '../metering/billing/support.ts';

const SEED = Number(process.env.MONEY_PATH_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CUSTOMERS = ['ada', 'bob', 'cy'];
const FEATURE = 'calls';
/** The first usage period ends this long after the subscriptions start; the second is watched for a part of its minute. */
const FIRST_PERIOD_MS = 28_000;
const SECOND_PHASE_MS = 14_000;
/** No request is sent this close to a period boundary: its period would depend on the clocks of client and gateway. */
const BOUNDARY_GUARD_MS = 600;

interface Answered {
  customer: string;
  status: number;
  id: string;
  /** The node that answered (events carry `tollgate/<its id>` as their source). */
  node: Node;
  /** When it was sent (ms): its usage period. */
  at: number;
}

/** A node of the topology: a gateway process (group) that can be stopped, crashed and started again. */
interface Node {
  gateway: SpawnedGateway;
  /** Its node id, the same across restarts on its data directory. */
  id: string;
  start(): Promise<void>;
}

function config(upstream: string, gateway: Record<string, unknown>): Record<string, any> {
  return billingConfig({
    collectionPeriod: 'PT1S',
    extra: {
      gateway,
      meters: [{ key: 'requests', name: 'Requests', event_type: 'kong.api_request', aggregation: 'count', dimensions: { status: '$.response_http_status', route: '$.route_name' } }],
      features: [{ key: FEATURE, name: 'Calls', meter: { key: 'requests', filters: { route: { eq: 'metered' } } } }],
      services: [
        {
          name: 'backend',
          url: upstream,
          routes: [
            {
              name: 'metered',
              paths: ['/metered'],
              plugins: [
                { name: 'key-auth', config: {} },
                { name: 'entitlement-enforcement', config: { feature: { key: FEATURE } } },
                // After the entitlement's decision (priority 910 < 915): what it refuses was admitted, and must give its place back.
                { name: 'rate-limiting', config: { second: 40, policy: 'local', limit_by: 'consumer' } },
                { name: 'metering-and-billing', config: { queue: { max_coalescing_delay: 0.2 } } },
              ],
            },
          ],
        },
      ],
      consumers: CUSTOMERS.map((name) => ({ username: name, keyauth_credentials: [{ key: `${name}-key-0123456789` }] })),
    },
  });
}

/** A node started with `spawnGateway`, on `dataDir` across restarts. */
function node(gatewayConfig: Record<string, any>, dataDir: string): Node {
  const n: Node = {
    gateway: undefined as unknown as SpawnedGateway,
    id: '',
    async start() {
      n.gateway = await spawnGateway(gatewayConfig, { dataDir });
      n.id = (await request(`${n.gateway.admin}/`)).json().node_id;
    },
  };
  return n;
}

/** The process ids of a node's workers (the primary's children). */
function workerPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

class MoneyPathRun {
  private readonly random = seeded(SEED);
  readonly answered: Answered[] = [];
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Request events the gateway made (source and id), to post again as duplicates. */
  private readonly made: { source: string; id: string; customer: string }[] = [];
  private boundaries: number[] = [];
  readonly log: string[] = [];

  constructor(
    private readonly nodes: Node[],
    private readonly workers: number,
  ) {}

  private int(n: number): number {
    return Math.floor(this.random() * n);
  }

  private pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }

  private live(): Node {
    return this.pick(this.nodes);
  }

  /** Waits while `at` lies within the guard of a period boundary. */
  private async clearOfBoundaries(): Promise<void> {
    for (const b of this.boundaries) {
      const now = Date.now();
      if (now > b - BOUNDARY_GUARD_MS && now < b + BOUNDARY_GUARD_MS) await sleep(b + BOUNDARY_GUARD_MS - now);
    }
  }

  private send(customer: string, key: string, path: string): Promise<void> {
    const at = Date.now();
    const node = this.live();
    const sending = request(`${node.gateway.http}${path}`, { headers: { apikey: key } }).then(
      (res: Reply) => void this.answered.push({ customer, status: res.status, id: String(res.headers['x-kong-request-id'] ?? ''), node, at }),
      // A connection cut by a stop or a crash was never answered: it counts for nothing.
      () => undefined,
    );
    this.inFlight.add(sending);
    return sending.finally(() => this.inFlight.delete(sending));
  }

  private path(): string {
    return this.random() < 0.2 ? `/metered/x?pad=${'p'.repeat(1_100 + this.int(400))}` : `/metered/x?n=${this.int(1_000)}`;
  }

  async step(): Promise<void> {
    await this.clearOfBoundaries();
    const customer = this.pick(CUSTOMERS);
    const key = `${customer}-key-0123456789`;
    const roll = this.random();
    if (roll < 0.3) {
      const count = 20 + this.int(181);
      this.log.push(`burst ${count} ${customer}`);
      await Promise.all(Array.from({ length: count }, () => this.send(customer, key, this.path())));
    } else if (roll < 0.55) {
      const count = 1 + this.int(8);
      this.log.push(`sequence ${count} ${customer}`);
      for (let i = 0; i < count; i++) await this.send(customer, key, this.path());
    } else if (roll < 0.65) {
      this.log.push(`bad keys ${customer}`);
      await Promise.all(Array.from({ length: 1 + this.int(5) }, () => this.send(customer, 'not-a-key', this.path())));
    } else if (roll < 0.8) {
      await this.postEvents(customer);
    } else {
      await sleep(50 + this.int(250));
    }
  }

  /** Events a producer posts: dated 40 days ahead and back, and copies of request events already made. */
  private async postEvents(customer: string): Promise<void> {
    const api = await BillingApi.connect(this.live().gateway.https);
    const at = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString();
    const foreign = (days: number) => ({ specversion: '1.0', id: randomUUID(), source: 'producer', type: 'kong.api_request', subject: customer, time: at(days), data: { route_name: 'metered', response_http_status: 200 } });
    const copies = this.made.filter((m) => m.customer === customer).slice(-3).map((m) => ({ specversion: '1.0', id: m.id, source: m.source, type: 'kong.api_request', subject: customer, data: { route_name: 'metered', response_http_status: 200 } }));
    const events = [foreign(40), foreign(-40), ...copies];
    const once = events[this.int(events.length)];
    this.log.push(`post ${events.length + 1} events ${customer}`);
    await api.ingestOk([...events, once], 'application/cloudevents-batch+json');
  }

  /** Remembers some request events made so far (committed by now), to post them again later. */
  noteMadeEvents(): void {
    for (const a of this.answered.slice(-40)) if (a.status === 200) this.made.push({ source: `tollgate/${a.node.id}`, id: a.id, customer: a.customer });
  }

  private async quiet(): Promise<void> {
    await Promise.all([...this.inFlight]);
    // Past the plugin's coalescing delay (0.2 s) and a commit: what was answered is on disk.
    await sleep(1_000);
  }

  /** A stop or a crash of one node, then it starts again (a crashed worker is replaced by its primary). */
  async disrupt(): Promise<void> {
    await Promise.all([...this.inFlight]);
    this.log.push(`[admitted so far: ${CUSTOMERS.map((c) => `${c} ${this.answered.filter((a) => a.customer === c && a.status === 200).length}`).join(', ')}]`);
    const target = this.live();
    const roll = this.random();
    const pid = target.gateway.child.pid!;
    if (roll < 0.3) {
      this.log.push(`SIGTERM to the group${roll < 0.1 ? ', twice' : ''}`);
      await this.stopGroup(target, 'SIGTERM', roll < 0.1);
    } else if (roll < 0.6) {
      this.log.push(`SIGINT to the group${roll < 0.45 ? ', twice' : ''}`);
      await this.stopGroup(target, 'SIGINT', roll < 0.45);
    } else if (roll < 0.8 && this.workers > 1) {
      await this.quiet();
      const worker = this.pick(workerPids(pid));
      this.log.push(`kill -9 of worker ${worker}`);
      if (worker) process.kill(worker, 'SIGKILL');
      await waitFor(async () => (workerPids(pid).length === this.workers && workerPids(pid).every((p) => p !== worker) ? true : undefined), 'the worker replaced', 20_000);
      await sleep(1_500);
    } else {
      await this.quiet();
      this.log.push('kill -9 of the whole node');
      target.gateway.kill('SIGKILL');
      await target.gateway.exited;
      await target.start();
    }
  }

  private async stopGroup(target: Node, signal: NodeJS.Signals, twice: boolean): Promise<void> {
    const pid = target.gateway.child.pid!;
    process.kill(-pid, signal);
    if (twice) {
      await sleep(30);
      try {
        process.kill(-pid, signal);
      } catch {
        // Gone already.
      }
    }
    const code = await target.gateway.exited;
    const output = target.gateway.output();
    assert.equal(code, 0, `seed ${SEED}: exit code after ${signal}:\n${output.slice(-3000)}`);
    assert.doesNotMatch(output, /^\s+at .+:\d+:\d+\)?$/m, `seed ${SEED}: a stack trace after ${signal}:\n${output.slice(-3000)}`);
    await target.start();
  }

  async run(until: number, boundaries: number[]): Promise<void> {
    this.boundaries = boundaries;
    let nextDisruption = Date.now() + 3_000 + this.int(4_000);
    while (Date.now() < until) {
      if (Date.now() > nextDisruption) {
        await this.disrupt();
        nextDisruption = Date.now() + 3_000 + this.int(5_000);
      } else await this.step();
    }
    await this.quiet();
  }
}

async function moneyPath(nodes: Node[], workers: number): Promise<void> {
  for (const n of nodes) await n.start();
  const api = await BillingApi.connect(nodes[0].gateway.https);
  const random = seeded(SEED + 1);
  const limits = Object.fromEntries(CUSTOMERS.map((c) => [c, 5 + Math.floor(random() * 30)]));
  const plan = (limit: number) => ({ key: FEATURE, name: 'Calls', feature_key: FEATURE, price: { type: 'unit', amount: '0.01' }, entitlement: { type: 'metered', limit: String(limit) } });
  const periods: Record<string, { from: number; to: number }> = {};
  for (const customer of CUSTOMERS) {
    const published = await api.activePlan([plan(limits[customer])]);
    await api.customer({ key: customer, usage_attribution: { subject_keys: [customer] } });
    const s = await api.subscribe(customer, published.key, { billing_anchor: anchorEndingIn(FIRST_PERIOD_MS) });
    periods[customer] = { from: Date.parse(s.current_period.from), to: Date.parse(s.current_period.to) };
  }
  const first = Math.max(...Object.values(periods).map((p) => p.to));
  const run = new MoneyPathRun(nodes, workers);
  const boundaries = Object.values(periods).map((p) => p.to);
  const phases = [first - BOUNDARY_GUARD_MS, first + SECOND_PHASE_MS];
  for (const end of phases) {
    await run.run(end, boundaries);
    run.noteMadeEvents();
  }
  const context = () => `seed ${SEED}, limits ${JSON.stringify(limits)}; steps: ${run.log.join('; ')}`;
  const reader = await BillingApi.connect(nodes[0].gateway.https);
  for (const customer of CUSTOMERS) {
    const p1 = periods[customer];
    const p2 = { from: p1.to, to: p1.to + 60_000 };
    for (const [index, period] of [p1, p2].entries()) {
      const admitted = run.answered.filter((a) => a.customer === customer && a.status === 200 && a.at >= period.from && a.at < period.to);
      assert.ok(admitted.length <= limits[customer], `${customer}, period ${index + 1}: ${admitted.length} admitted over a limit of ${limits[customer]}; ${context()}`);
      const byStatus = await reader.queryOk('requests', {
        from: new Date(period.from).toISOString(),
        to: new Date(Math.ceil(period.to / 1000) * 1000).toISOString(),
        filters: { dimensions: { subject: { eq: customer } } },
        group_by_dimensions: ['status'],
      });
      const metered = byStatus.data.map((row) => [row.dimensions!.status, row.value]);
      assert.deepEqual(metered, admitted.length ? [['200', String(admitted.length)]] : [], `${customer}, period ${index + 1}: metered by status; ${context()}`);
    }
    const [issued] = await waitFor(async () => {
      const list = await reader.invoices(customer);
      return list.length > 0 ? list : undefined;
    }, `${customer}'s first invoice`, 30_000);
    const billed = (invoice: any) => invoice.lines.find((l: any) => l.rate_card_key === FEATURE)?.quantity ?? '0';
    const inFirst = run.answered.filter((a) => a.customer === customer && a.status === 200 && a.at < p1.to).length;
    assert.equal(billed(issued), String(inFirst), `${customer}: issued invoice of period 1; ${context()}`);
    const upcoming = await reader.ok(200, reader.get(`/customers/${customer}/upcoming-invoice`));
    const inSecond = run.answered.filter((a) => a.customer === customer && a.status === 200 && a.at >= p1.to).length;
    assert.equal(billed(upcoming), String(inSecond), `${customer}: upcoming invoice of period 2; ${context()}`);
  }
}

describe(`the money path under a random mix of requests, events, stops and crashes (seed ${SEED})`, () => {
  test('on one process', async (t) => {
    const up = await startUpstream();
    t.after(() => up.close());
    const n = node(config(up.url, { worker_processes: 1 }), tempDir());
    t.after(() => stopQuietly(n));
    await moneyPath([n], 1);
  });

  test('on a node of 2 worker processes', async (t) => {
    const up = await startUpstream();
    t.after(() => up.close());
    const n = node(config(up.url, { worker_processes: 2 }), tempDir());
    t.after(() => stopQuietly(n));
    await moneyPath([n], 2);
  });

  test('on 2 nodes sharing PostgreSQL', { skip: postgresSkipReason() }, async (t) => {
    const up = await startUpstream();
    t.after(() => up.close());
    const pg: ThrowawayPostgres = await startPostgres();
    const settings = pg.settings({ pg_schema: 'money_path', db_update_frequency: 0.2, worker_processes: 1 });
    const nodes = [node(config(up.url, settings), tempDir()), node(config(up.url, settings), tempDir())];
    t.after(async () => {
      for (const n of nodes) await stopQuietly(n);
      await pg.stop();
    });
    await moneyPath(nodes, 1);
  });
});

async function stopQuietly(n: Node): Promise<void> {
  if (!n.gateway || n.gateway.child.exitCode !== null || n.gateway.child.signalCode !== null) return;
  n.gateway.kill('SIGTERM');
  await n.gateway.exited;
}
