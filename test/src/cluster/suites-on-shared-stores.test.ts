/**
 * The plugin suites written against one in-process gateway, run again on the stores several processes
 * share, each in a child `node --test`, when TOLLGATE_SHARED_STORE_SUITES=1 is set (they take as long as
 * the rest of the suite):
 * - on nodes of two worker processes sharing the primary's LevelDB (TOLLGATE_TEST_WORKERS=2: startGateway
 *   starts a real multi-process node);
 * - on PostgreSQL (TOLLGATE_TEST_POSTGRES: startGateway's gateways run on a throwaway cluster, each in a
 *   schema of its own), where metering keeps its events in the journal.
 * A group runs once every plugin it exercises declares `multiProcess` (read from the plugin definitions):
 * until then it is skipped, saying which plugin it waits for.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { bundledPlugins } from '../../../src/plugins.ts';
import { postgresSkipReason, startPostgres, type ThrowawayPostgres } from '../../helpers/postgres.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
const WORKERS = 2;
/** A whole group in worker mode; each of its tests keeps the usual per-test limit. */
const GROUP_TIMEOUT_MS = 25 * 60_000;

interface SuiteGroup {
  /** Folders under test/plugins whose *.test.ts files run. */
  folders: string[];
  /** The plugins the suites exercise (their fixtures included). */
  plugins: string[];
  /** Files of those folders left out (see where a group says why). */
  except?: string[];
}

/**
 * What runs where, within the time CI allows (each topology costs about as much as the main step's
 * plugin suites). Nodes of workers, the default topology: oauth2 and metering (as issue 14 asks), and
 * the plugins built on them. PostgreSQL: what keeps state differently there, metering (events in the
 * journal) and billing on its usage, and the plugins built on them; oauth2's state is the store's keys,
 * the same on both, and billing's cross-node behaviour is billing/cluster.test.ts's.
 */
const ON_WORKERS: SuiteGroup[] = [
  { folders: ['oauth2', 'metering', 'metering/notification'], plugins: ['oauth2', 'metering'] },
  { folders: ['metering-and-billing', 'entitlement-enforcement'], plugins: ['metering-and-billing', 'entitlement-enforcement', 'oauth2'] },
  { folders: ['prometheus'], plugins: ['prometheus', 'oauth2'] },
  // A credential kept by the core, its admin API and its reload on every worker (about 20 s).
  { folders: ['hmac-auth'], plugins: ['hmac-auth', 'key-auth'] },
  { folders: ['http-log', 'file-log', 'tcp-log', 'udp-log', 'syslog'], plugins: ['http-log', 'file-log', 'tcp-log', 'udp-log', 'syslog', 'correlation-id', 'key-auth'] },
  // Verdicts asked of the node's other processes; a session opened by any worker, its secret and revocations in the store (under a minute).
  { folders: ['ldap-auth', 'session'], plugins: ['ldap-auth', 'session', 'key-auth', 'acl', 'request-termination'] },
];
const ON_POSTGRES: SuiteGroup[] = [
  // kill -9 and restarts on PostgreSQL are the cluster suites' (cluster-failover.test.ts): these two test LevelDB's.
  { folders: ['metering', 'metering/billing', 'metering/notification'], plugins: ['metering'], except: ['crash.test.ts', 'impl-durability.test.ts'] },
  { folders: ['metering-and-billing', 'entitlement-enforcement'], plugins: ['metering-and-billing', 'entitlement-enforcement', 'oauth2'] },
  // http-log's queue is the store's: on PostgreSQL it is shared by the nodes.
  { folders: ['http-log'], plugins: ['http-log'] },
];

/** The plugins of `names` (and those whose services they call) that do not declare multiProcess yet. */
function notYetMultiProcess(names: string[]): string[] {
  const needed = new Set(names);
  for (const name of needed) for (const used of bundledPlugins.get(name)?.uses ?? []) needed.add(used);
  return [...needed].filter((name) => !bundledPlugins.get(name)?.multiProcess);
}

/**
 * The suites of `folder`, but for its cluster tests (`cluster*.test.ts`): they start the topologies they
 * test themselves (several nodes, or a node of workers), and run once in the main step; on nodes of
 * workers each of their nodes would be three processes, too slow for the time CI allows.
 */
function suiteFiles(folder: string): string[] {
  const dir = join(ROOT, 'test/plugins', folder);
  return readdirSync(dir).filter((f) => f.endsWith('.test.ts') && !f.startsWith('cluster')).sort().map((f) => relative(ROOT, join(dir, f)));
}

/** Runs `files` in a child `node --test` with `mode` in its environment; resolves with its exit code and output. */
function runIn(mode: Record<string, string>, files: string[]): Promise<{ code: number | null; output: string }> {
  // Without the parent runner's context, the child reports for itself instead of to this runner.
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-timeout=180000', '--test-reporter=tap', ...files], {
    cwd: ROOT,
    env: { ...env, ...mode },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  return new Promise((resolvePromise) => child.once('close', (code) => resolvePromise({ code, output })));
}

/** Each failed test's line with the report under it (its error, expected and actual), from a TAP output. */
function failures(output: string): string {
  const lines = output.split('\n');
  return lines
    .flatMap((line, i) => (/^\s*not ok \d+ - /.test(line) && !/# SKIP/.test(line) ? [lines.slice(i, i + 25).join('\n')] : []))
    .join('\n');
}

const notRequested = !process.env.TOLLGATE_SHARED_STORE_SUITES && 'runs with TOLLGATE_SHARED_STORE_SUITES=1, as in CI (the suites again on shared stores: about as long as the rest)';

/** One test per group, each running the group's suites with the environment `mode()` gives. */
function suitesOn(topology: string, groups: SuiteGroup[], mode: () => Record<string, string>): void {
  for (const group of groups) {
    const waiting = notYetMultiProcess(group.plugins);
    const skip = waiting.length > 0 ? `waits for plugin ${waiting.map((n) => `'${n}'`).join(', ')} to declare multiProcess` : notRequested;
    test(`the ${group.folders.join(' and ')} suites pass ${topology}`, { skip, timeout: GROUP_TIMEOUT_MS }, async () => {
      const files = group.folders.flatMap(suiteFiles).filter((file) => !group.except?.some((name) => file.endsWith('/' + name)));
      const { code, output } = await runIn(mode(), files);
      assert.equal(code, 0, `failed ${topology}:\n${failures(output)}\n\n${output.slice(-2000)}`);
    });
  }
}

suitesOn(`on nodes of ${WORKERS} worker processes`, ON_WORKERS, () => ({ TOLLGATE_TEST_WORKERS: String(WORKERS) }));

describe('on PostgreSQL', { skip: notRequested || postgresSkipReason() }, () => {
  let cluster: ThrowawayPostgres | undefined;
  before(async () => {
    cluster = await startPostgres();
  });
  after(() => cluster?.stop());
  suitesOn('on PostgreSQL', ON_POSTGRES, () => ({ TOLLGATE_TEST_POSTGRES: JSON.stringify(cluster!.settings()) }));
});
