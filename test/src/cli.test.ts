/**
 * The command line: `check` exit codes and FILE:LINE:COL output, and `start` refusing to run (exit 1,
 * nothing served) on a bad config, a taken port, or an unusable data directory.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { stringify } from 'yaml';
import { tempDir } from '../helpers/gateway.ts';
import { closedPort } from './support.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const TSX = join(ROOT, 'node_modules/.bin/tsx');
const CLI = join(ROOT, 'src/cli.ts');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd: options.cwd ?? ROOT, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('exit', (code) => resolvePromise({ code, stdout, stderr }));
  });
}

const cli = (args: string[], options?: Parameters<typeof run>[2]) => run(TSX, [CLI, ...args], options);

function writeYaml(dir: string, lines: string[]): string {
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

function isListening(port: number): Promise<boolean> {
  return new Promise((r) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      r(true);
    });
    s.once('error', () => r(false));
  });
}

const BAD = [
  '_format_version: "3.0"', //          1
  'services:', //                       2
  '  - name: a', //                     3
  '    port: 99999', //                 4
  '    routes:', //                     5
  '      - paths: [/x]', //             6
  '        strip: true', //             7
  'plugins:', //                        8
  '  - name: oauth2', //                9
  '    config: {}', //                  10
];

test('npm run check: exit 1 and every error as FILE:LINE:COL: path: message on stderr', async () => {
  const file = writeYaml(tempDir(), BAD);
  const result = await run('npm', ['run', '--silent', 'check', '--', '--config', file]);
  assert.equal(result.code, 1, result.stdout + result.stderr);
  assert.deepEqual(result.stderr.trim().split('\n'), [
    `${file}:3:5: services[0].host: required field missing`,
    `${file}:4:11: services[0].port: value should be between 0 and 65535`,
    `${file}:7:9: services[0].routes[0].strip: unknown field`,
    `${file}:10:13: plugins[0].config: at least one of these fields must be true: enable_authorization_code, enable_implicit_grant, enable_client_credentials, enable_password_grant`,
  ]);
});

test('check: exit 0 on a valid file, found by --config, GATEWAY_CONFIG or ./gateway.yaml', async () => {
  const dir = tempDir();
  const file = writeYaml(dir, ['_format_version: "3.0"', 'services:', '  - { name: a, url: "http://127.0.0.1:1", routes: [ { paths: [/a] } ] }']);
  const byFlag = await cli(['check', '--config', file]);
  assert.equal(byFlag.code, 0, byFlag.stderr);
  assert.match(byFlag.stdout, /configuration is valid/);
  const byEnv = await cli(['check'], { env: { GATEWAY_CONFIG: file } });
  assert.equal(byEnv.code, 0, byEnv.stderr);
  const byCwd = await cli(['check'], { cwd: dir });
  assert.equal(byCwd.code, 0, byCwd.stderr);
  const missing = await cli(['check', '--config', join(dir, 'nope.yaml')]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /nope\.yaml:1:1: \(root\): cannot read the file/);
  assert.equal((await cli(['frobnicate'])).code, 2, 'an unknown command');
});

test("the repository's own gateway.yaml is valid", async () => {
  const result = await cli(['check']);
  assert.equal(result.code, 0, result.stderr);
});

function startConfig(dir: string, port: number, extra: Record<string, unknown> = {}): string {
  const file = join(dir, 'gateway.yaml');
  writeFileSync(
    file,
    stringify({
      _format_version: '3.0',
      gateway: { proxy_listen: [`127.0.0.1:${port}`], admin_listen: ['off'], data_dir: join(dir, 'data'), log_level: 'silent', ...extra },
      services: [{ name: 'a', url: 'http://127.0.0.1:1', routes: [{ paths: ['/a'] }] }],
    }),
  );
  return file;
}

test('start with a bad config: exit 1, the errors printed, nothing served', async () => {
  const dir = tempDir();
  const port = await closedPort();
  const file = writeYaml(dir, [...BAD, 'gateway:', `  proxy_listen: ["127.0.0.1:${port}"]`, '  admin_listen: ["off"]']);
  const result = await cli(['start', '--config', file]);
  assert.equal(result.code, 1);
  assert.match(result.stderr, new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:4:11: services\\[0\\]\\.port: value should be between 0 and 65535$`, 'm'));
  assert.match(result.stderr, /invalid configuration, not starting/);
  assert.doesNotMatch(result.stdout, /listening on/);
  assert.equal(await isListening(port), false);
});

test('start on a taken port: exit 1 with a clear message', async () => {
  const blocker = net.createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
  const port = (blocker.address() as net.AddressInfo).port;
  try {
    const result = await cli(['start', '--config', startConfig(tempDir(), port)]);
    assert.equal(result.code, 1);
    assert.match(result.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: the address is already in use`));
  } finally {
    blocker.close();
  }
});

test('start on an address this host does not have: exit 1 naming the listener', async () => {
  const dir = tempDir();
  const file = startConfig(dir, 0);
  writeFileSync(file, readFileSync(file, 'utf8').replace('127.0.0.1:0', '192.0.2.1:8000'));
  const result = await cli(['start', '--config', file]);
  assert.equal(result.code, 1);
  assert.match(result.stderr, /^tollgate: cannot listen on 192\.0\.2\.1:8000: .*EADDRNOTAVAIL/m);
});

test('start with an unusable data directory: exit 1 with a clear message, nothing served', async () => {
  const dir = tempDir();
  const notADirectory = join(dir, 'file');
  writeFileSync(notADirectory, 'x');
  const port = await closedPort();
  const result = await cli(['start', '--config', startConfig(dir, port, { data_dir: join(notADirectory, 'data') })]);
  assert.equal(result.code, 1);
  assert.match(result.stderr, /tollgate: the data directory .*file\/data is not usable/);
  assert.equal(await isListening(port), false);
});

test('start on a data directory another gateway holds: exit 1 naming the lock', async () => {
  const dir = tempDir();
  mkdirSync(join(dir, 'data'));
  const { LevelStore } = await import('../../src/store/level.ts');
  const holder = new LevelStore(join(dir, 'data', 'store'));
  await holder.open();
  try {
    const result = await cli(['start', '--config', startConfig(dir, await closedPort())]);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /cannot open the store in .*is another gateway running on this data directory\?/);
  } finally {
    await holder.close();
  }
});
