/**
 * The `gateway:` settings of several processes and nodes (kong.conf's names): defaults, every mistake
 * reported at its position, and several worker processes refused while a configured plugin keeps
 * state in one process.
 */
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { test } from 'node:test';
import { workerCount } from '../../../src/config/entities.ts';
import { loadConfigText } from '../../../src/config/load.ts';
import type { GatewayConfig } from '../../../src/config/types.ts';
import type { PluginDefinition } from '../../../src/pdk/types.ts';
import { bundledPlugins } from '../../../src/plugins.ts';
import { postgresSettings } from '../../../src/store/open.ts';

const FILE = 'gw.yaml';

function loadWith(registry: ReadonlyMap<string, PluginDefinition>, ...lines: string[]) {
  return loadConfigText(lines.join('\n') + '\n', '/tmp/tollgate-cluster-settings/gw.yaml', registry, FILE);
}

function load(...lines: string[]): GatewayConfig {
  const result = loadWith(bundledPlugins, ...lines);
  if (!result.ok) assert.fail(result.errors.map(String).join('\n'));
  return result.config;
}

function errorsOf(...lines: string[]): string[] {
  const result = loadWith(bundledPlugins, ...lines);
  assert.equal(result.ok, false, 'expected the config to be refused');
  return result.ok ? [] : result.errors.map(String);
}

test('defaults: embedded LevelDB, a process per core, changes seen within a second; PostgreSQL settings with their defaults', () => {
  const { gateway, oneProcessBecause } = load('_format_version: "3.0"');
  assert.equal(gateway.database, 'leveldb');
  assert.equal(gateway.worker_processes, 'auto');
  assert.equal(oneProcessBecause, null);
  assert.equal(gateway.db_update_frequency, 1);
  assert.deepEqual(
    [
      gateway.pg_host,
      gateway.pg_port,
      gateway.pg_user,
      gateway.pg_password,
      gateway.pg_database,
      gateway.pg_schema,
      gateway.pg_ssl,
      gateway.pg_ssl_verify,
      gateway.pg_pool_size,
    ],
    ['127.0.0.1', 5432, 'tollgate', null, 'tollgate', 'public', false, true, 10],
  );
});

test('PostgreSQL settings and worker processes as an operator writes them', () => {
  const { gateway } = load(
    '_format_version: "3.0"',
    'gateway:',
    '  database: postgres',
    '  pg_host: db.internal',
    '  pg_port: 6432',
    '  pg_user: gw',
    '  pg_password: s3cret',
    '  pg_database: gateway',
    '  pg_schema: tollgate_1',
    '  pg_ssl: true',
    '  pg_pool_size: 4',
    '  worker_processes: auto',
    '  db_update_frequency: 0.5',
  );
  assert.equal(gateway.database, 'postgres');
  assert.equal(gateway.pg_host, 'db.internal');
  assert.equal(gateway.pg_port, 6432);
  assert.equal(gateway.pg_password, 's3cret');
  assert.equal(gateway.pg_schema, 'tollgate_1');
  assert.equal(postgresSettings(gateway).poolSize, 4, 'the store opens at most pg_pool_size connections for queries');
  assert.equal(gateway.worker_processes, 'auto');
  assert.equal(workerCount(gateway.worker_processes), availableParallelism());
  assert.equal(gateway.db_update_frequency, 0.5);
  assert.equal(load('_format_version: "3.0"', 'gateway:', '  worker_processes: 3').gateway.worker_processes, 3);
});

test('every mistake in these settings is reported at its line', () => {
  assert.deepEqual(
    errorsOf(
      '_format_version: "3.0"', //               1
      'gateway:', //                             2
      '  database: mysql', //                    3
      '  pg_port: 70000', //                     4
      '  pg_schema: "Robert\'); DROP"', //       5
      '  worker_processes: many', //             6
      '  db_update_frequency: 0', //             7
      '  pg_ssl: sometimes', //                  8
    ),
    [
      'gw.yaml:3:13: gateway.database: expected one of: leveldb, postgres',
      'gw.yaml:4:12: gateway.pg_port: value should be between 1 and 65535',
      'gw.yaml:5:14: gateway.pg_schema: expected a PostgreSQL identifier: a letter or _, then letters, digits or _ (at most 63)',
      'gw.yaml:6:21: gateway.worker_processes: expected \'auto\' or an integer between 1 and 256',
      'gw.yaml:7:24: gateway.db_update_frequency: value should be between 0.05 and 3600',
      'gw.yaml:8:11: gateway.pg_ssl: expected a boolean',
    ],
  );
  assert.deepEqual(errorsOf('_format_version: "3.0"', 'gateway:', '  worker_processes: 0'), [
    "gw.yaml:3:21: gateway.worker_processes: expected 'auto' or an integer between 1 and 256",
  ]);
});

test('several worker processes are refused while a configured plugin keeps its state in one process', () => {
  const single: PluginDefinition = { name: 'single', version: '1', priority: 1, configSchema: { type: 'record', fields: {} }, create: () => ({}) };
  const shared: PluginDefinition = { ...single, name: 'shared', multiProcess: true };
  const registry = new Map([[single.name, single], [shared.name, shared]]);
  const config = (workers: string, ...plugins: string[]) => ['_format_version: "3.0"', 'gateway:', `  worker_processes: ${workers}`, 'plugins:', ...plugins.map((p) => `  - name: ${p}`)];
  const refused = loadWith(registry, ...config('2', 'single', 'shared'));
  assert.equal(refused.ok, false);
  assert.deepEqual(refused.ok ? [] : refused.errors.map(String), ["gw.yaml:3:21: gateway.worker_processes: plugin 'single' keeps state in one process: it runs with worker_processes: 1 only"]);
  assert.equal(loadWith(registry, ...config('2', 'shared')).ok, true, 'a plugin that declares multiProcess runs on several');
  assert.equal(loadWith(registry, ...config('1', 'single')).ok, true, 'one process is always fine');
  assert.equal(loadWith(registry, ...config('2'), '  - { name: single, enabled: false }').ok, true, 'a disabled instance keeps nothing');
  // Declared entities of such a plugin count as using it (as the metering plugin syncs declared meters).
  const keeper: PluginDefinition = { ...single, name: 'keeper', entities: [{ name: 'keepers', schema: { type: 'record', fields: { name: { type: 'string' } } } }] };
  const withEntities = loadWith(new Map([[keeper.name, keeper]]), '_format_version: "3.0"', 'gateway:', '  worker_processes: 2', 'keepers:', '  - { name: one }');
  assert.deepEqual(withEntities.ok ? [] : withEntities.errors.map(String), ["gw.yaml:3:21: gateway.worker_processes: plugin 'keeper' keeps state in one process: it runs with worker_processes: 1 only"]);
});

test('left at its default, worker_processes comes down to 1 while a plugin in use keeps state in one process, and says why', { skip: availableParallelism() === 1 && 'one core: auto is one process anyway' }, () => {
  const single: PluginDefinition = { name: 'single', version: '1', priority: 1, configSchema: { type: 'record', fields: {} }, create: () => ({}) };
  const shared: PluginDefinition = { ...single, name: 'shared', multiProcess: true };
  // Multi-process itself, but it calls the services of 'single': where it runs, 'single' is in use.
  const caller: PluginDefinition = { ...single, name: 'caller', multiProcess: true, uses: ['single'] };
  const registry = new Map([single, shared, caller].map((p) => [p.name, p]));
  const config = (...plugins: string[]) => ['_format_version: "3.0"', 'plugins:', ...plugins.map((p) => `  - name: ${p}`)];
  const loaded = (...lines: string[]) => {
    const result = loadWith(registry, ...lines);
    assert.equal(result.ok, true, result.ok ? '' : result.errors.join('\n'));
    return result.ok ? result.config : assert.fail();
  };

  const withSingle = loaded(...config('single', 'shared'));
  assert.equal(withSingle.gateway.worker_processes, 1);
  assert.equal(withSingle.oneProcessBecause, "one worker process instead of worker_processes: auto (the default): plugin 'single' keeps state in one process");
  const withCaller = loaded(...config('caller'));
  assert.equal(withCaller.gateway.worker_processes, 1);
  assert.match(withCaller.oneProcessBecause ?? '', /plugin 'single' keeps state in one process/);
  const withShared = loaded(...config('shared'));
  assert.deepEqual([withShared.gateway.worker_processes, withShared.oneProcessBecause], ['auto', null]);

  // Asked for explicitly, several processes are still refused, a plugin used through another's services included.
  const explicit = loadWith(registry, '_format_version: "3.0"', 'gateway:', '  worker_processes: auto', 'plugins:', '  - name: caller');
  assert.deepEqual(explicit.ok ? [] : explicit.errors.map(String), ["gw.yaml:3:21: gateway.worker_processes: plugin 'single' keeps state in one process: it runs with worker_processes: 1 only"]);
});
