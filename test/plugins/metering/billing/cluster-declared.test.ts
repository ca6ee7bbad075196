/**
 * gateway.yaml's customers, features and plans on several processes sharing a store: a node of two
 * worker processes, and two nodes on one PostgreSQL started at the same moment. Every process loads the
 * same file, but the declarations are applied by one process, once per start or reload: one version of
 * each declared plan, and no process logs a declaration as refused when it was applied by another.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { parse, stringify } from 'yaml';
import { spawnGateway, type SpawnedGateway } from '../../../helpers/gateway.ts';
import { postgresForSuite, postgresSkipReason } from '../../../helpers/postgres.ts';
import { waitFor } from '../../../helpers/support.ts';
import { BillingApi, billingConfig, planBody } from './support.ts';

const REFUSED = 'cannot be applied';
const APPLIED = 'billing: applied the customers, features and plans of gateway.yaml';
/** What the node's primary logs once every worker has taken a reload. */
const RELOADED = 'configuration reloaded on every worker';

function declaring(gateway: Record<string, unknown>): Record<string, any> {
  const config = billingConfig({
    extra: {
      customers: [{ key: 'declared-acme', name: 'Declared Acme', currency: 'USD' }],
      features: [{ key: 'declared_calls', name: 'Declared calls', meter: { key: 'api_calls' } }],
      plans: [planBody('declared_pro', [{ key: 'declared_calls', name: 'Calls', feature_key: 'declared_calls', price: { type: 'unit', amount: '0.01' } }])],
    },
  });
  return { ...config, gateway: { log_level: 'info', access_log: false, ...gateway } };
}

const count = (text: string, what: string) => text.split(what).length - 1;

async function planVersions(api: BillingApi): Promise<[number, string][]> {
  return (await api.ok(200, api.get('/plans?key=declared_pro'))).data.map((p: any) => [p.version, p.status]);
}

/**
 * The nodes' output once they logged `applied` applications of the file in all, or a refusal (a node
 * serves once its processes are configured, but their log lines reach its output in their own time).
 */
async function outputAfter(nodes: SpawnedGateway[], applied: number): Promise<string> {
  return waitFor(async () => {
    const all = nodes.map((n) => n.output()).join('\n');
    return count(all, APPLIED) >= applied || all.includes(REFUSED) ? all : undefined;
  }, `${applied} application(s) of gateway.yaml`, 20_000);
}

/** Applied `applied` times in all, by one process each time, and nothing refused. */
async function assertAppliedOnce(nodes: SpawnedGateway[], applied: number): Promise<void> {
  const output = await outputAfter(nodes, applied);
  assert.equal(count(output, REFUSED), 0, output);
  assert.equal(count(output, APPLIED), applied, output);
}

describe('declared billing entities on several processes', () => {
  test('a node of two workers applies gateway.yaml once at start and once per reload, without a false refusal', async () => {
    const node = await spawnGateway(declaring({ worker_processes: 2 }));
    try {
      const api = await BillingApi.connect(node.https);
      assert.deepEqual(await planVersions(api), [[1, 'active']]);
      assert.equal((await api.ok(200, api.get('/customers/declared-acme'))).currency, 'USD');
      await assertAppliedOnce([node], 1);

      const next = parse(readFileSync(node.configFile, 'utf8'));
      next.plans[0].phases[0].rate_cards[0].price.amount = '0.02';
      writeFileSync(node.configFile, stringify(next));
      node.kill('SIGHUP');
      await waitFor(async () => (node.output().includes(RELOADED) ? true : undefined), 'the reload on every worker', 20_000);
      assert.deepEqual(await planVersions(api), [[1, 'archived'], [2, 'active']]);
      await assertAppliedOnce([node], 2);
    } finally {
      node.kill('SIGTERM');
      await node.exited;
    }
  });
});

describe('declared billing entities on two nodes sharing PostgreSQL', { skip: postgresSkipReason() }, () => {
  const suite = postgresForSuite();

  test('two nodes started at once apply gateway.yaml once, without a false refusal', async () => {
    const gateway = suite.pg.settings({ pg_schema: suite.schema('declared'), worker_processes: 1 });
    const nodes = await Promise.all([0, 1].map(() => spawnGateway(declaring(gateway))));
    for (const node of nodes) suite.track(async () => {
      node.kill('SIGTERM');
      await node.exited;
    });
    for (const node of nodes) assert.deepEqual(await planVersions(await BillingApi.connect(node.https)), [[1, 'active']]);
    await assertAppliedOnce(nodes, 1);
  });
});
