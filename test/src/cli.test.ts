/**
 * The command line as a user gets it: the package packed (`npm pack`), installed into a temp
 * directory, and run through the `node_modules/.bin/tollgate` symlink npm makes. Help, version and
 * usage errors (one line, exit 2); `check` exit codes and FILE:LINE:COL output; `start` refusing to
 * run (exit 1, nothing served) on a bad config, a taken port or an unusable data directory, and
 * stopping cleanly on SIGTERM. `npm start` stops its gateway when npm is stopped.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { lstatSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join, resolve } from 'node:path';
import { before, test, type TestContext } from 'node:test';
import { stringify } from 'yaml';
import { isAlive, request, tempDir } from '../helpers/gateway.ts';
import { closedPort, isListening, waitFor } from '../helpers/support.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const VERSION = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version as string;

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

/** The `tollgate` command of the package installed from its tarball. */
let BIN = '';

before(() => {
  const dir = tempDir('tollgate-install-');
  const tarball = execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: ROOT, encoding: 'utf8' }).trim().split('\n').pop()!;
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'tollgate-user', private: true }));
  // The dependencies are in npm's cache since this checkout was installed.
  execFileSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', join(dir, tarball)], { cwd: dir, stdio: 'ignore' });
  BIN = join(dir, 'node_modules', '.bin', 'tollgate');
});

const cli = (args: string[], options?: Parameters<typeof run>[2]) => run(BIN, args, options);

function writeYaml(dir: string, lines: string[]): string {
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
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
    `${file}:7:9: services[0].routes[0].strip: unknown field; did you mean 'strip_path'?`,
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
});

test("the repository's own gateway.yaml is valid", async () => {
  const result = await cli(['check'], { cwd: ROOT });
  assert.equal(result.code, 0, result.stderr);
});

test('the installed command is a symlink in node_modules/.bin that runs from any directory', async () => {
  assert.ok(lstatSync(BIN).isSymbolicLink());
  const result = await cli(['version'], { cwd: tempDir() });
  assert.deepEqual(result, { code: 0, stdout: `${VERSION}\n`, stderr: '' });
});

test('--version, -v and version print the version; --help, -h and help print the usage; exit 0', async () => {
  for (const args of [['--version'], ['-v'], ['version']]) assert.deepEqual(await cli(args), { code: 0, stdout: `${VERSION}\n`, stderr: '' }, args.join(' '));
  for (const args of [['--help'], ['-h'], ['help']]) {
    const result = await cli(args);
    assert.equal(result.code, 0, args.join(' '));
    assert.match(result.stdout, /^Usage: tollgate <command> \[options\]$/m);
    for (const command of ['start', 'check', 'version', 'help']) assert.match(result.stdout, new RegExp(`^  ${command} +\\S`, 'm'));
    assert.match(result.stdout, /^Exit codes: 0 success; 1 failure .*; 2 bad usage; 3 the embedded store is damaged .*\.$/m);
  }
});

test('each command has its own --help, -h and `help <command>`', async () => {
  for (const args of [['start', '--help'], ['start', '-h'], ['help', 'start']]) {
    const result = await cli(args);
    assert.equal(result.code, 0, args.join(' '));
    assert.match(result.stdout, /^Usage: tollgate start \[options\]$/m);
    assert.match(result.stdout, /^  -c, --config FILE +the configuration file/m);
    assert.match(result.stdout, /^      --pid-file FILE +where to write the pid/m);
    assert.match(result.stdout, /SIGHUP/);
  }
  const checkHelp = await cli(['check', '--help']);
  assert.match(checkHelp.stdout, /^Usage: tollgate check \[options\]$/m);
  assert.match(checkHelp.stdout, /FILE:LINE:COL/);
});

test('bad usage: one line on stderr naming the mistake and where help is, exit 2, no stack trace', async () => {
  const cases: [string[], string][] = [
    [['start', '--conf', 'x.yaml'], "tollgate start: unknown option '--conf'; did you mean '--config'? (see 'tollgate start --help')"],
    [['check', '--confg=x.yaml'], "tollgate check: unknown option '--confg'; did you mean '--config'? (see 'tollgate check --help')"],
    [['check', '-x'], "tollgate check: unknown option '-x' (see 'tollgate check --help')"],
    [['check', '--config'], "tollgate check: option '--config' needs a value (see 'tollgate check --help')"],
    [['check', 'gateway.yaml'], "tollgate check: unexpected argument 'gateway.yaml' (see 'tollgate check --help')"],
    [['strat'], "tollgate: unknown command 'strat'; did you mean 'start'? (see 'tollgate --help')"],
    [['help', 'chek'], "tollgate: unknown command 'chek'; did you mean 'check'? (see 'tollgate --help')"],
    [['--conf'], "tollgate: unknown option '--conf': options come after the command (see 'tollgate --help')"],
  ];
  for (const [args, message] of cases) {
    const result = await cli(args);
    assert.deepEqual(result, { code: 2, stdout: '', stderr: message + '\n' }, args.join(' '));
  }
  const bare = await cli([]);
  assert.equal(bare.code, 2);
  assert.match(bare.stderr, /^Usage: tollgate <command>/);
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

/** Waits for the gateway child to print its listeners; returns them and the output so far. */
function started(child: ReturnType<typeof spawn>): Promise<{ urls: string[]; output: () => string }> {
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  return new Promise((resolvePromise, reject) => {
    child.once('exit', (code) => reject(new Error(`exited with ${code}: ${out}`)));
    const timer = setInterval(() => {
      const urls = [...out.matchAll(/listening on (\S+)/g)].map((m) => m[1]);
      if (urls.length < 2 || !out.includes('SIGTERM stops')) return;
      clearInterval(timer);
      resolvePromise({ urls, output: () => out });
    }, 20);
  });
}

function exitOf(child: ReturnType<typeof spawn>): Promise<number | null> {
  return new Promise((r) => (child.exitCode !== null ? r(child.exitCode) : child.once('exit', (code) => r(code))));
}

function serveConfig(dir: string): string {
  const file = join(dir, 'gateway.yaml');
  writeFileSync(file, stringify({ _format_version: '3.0', gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], data_dir: join(dir, 'data') } }));
  return file;
}

test('the installed start serves, writes its pid file, and on SIGTERM stops with exit 0 and removes it', async () => {
  const dir = tempDir();
  const child = spawn(BIN, ['start', '--config', serveConfig(dir)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const { urls, output } = await started(child);
  const pidFile = join(dir, 'data', 'tollgate.pid');
  assert.equal(readFileSync(pidFile, 'utf8'), `${child.pid}\n`, 'the pid of the gateway itself');
  assert.equal((await request(`${urls[1]}/status`)).status, 200);
  child.kill('SIGTERM');
  assert.equal(await exitOf(child), 0, output());
  assert.throws(() => lstatSync(pidFile), /ENOENT/);
});

test('start --pid-file writes the pid where it is told; an unwritable one refuses to start', async () => {
  const dir = tempDir();
  const pidFile = join(dir, 'gw.pid');
  const child = spawn(BIN, ['start', '--config', serveConfig(dir), '--pid-file', pidFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  await started(child);
  assert.equal(readFileSync(pidFile, 'utf8'), `${child.pid}\n`);
  child.kill('SIGINT');
  assert.equal(await exitOf(child), 0);
  const refused = await cli(['start', '--config', serveConfig(tempDir()), '--pid-file', join(dir, 'missing', 'gw.pid')]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^tollgate: cannot write the pid file .*missing\/gw\.pid: ENOENT/m);
});

/** `npm start` in this checkout, on a config of its own. */
async function npmStart(t: TestContext): Promise<{ npm: ReturnType<typeof spawn>; gatewayPid: number; pidFile: string }> {
  const dir = tempDir();
  const npm = spawn('npm', ['start', '--', '--config', serveConfig(dir)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  await started(npm);
  const pidFile = join(dir, 'data', 'tollgate.pid');
  const gatewayPid = Number(readFileSync(pidFile, 'utf8'));
  // An orphaned gateway would hold the test's pipes open and keep its ports: never leave one behind.
  t.after(() => {
    npm.kill('SIGKILL');
    if (isAlive(gatewayPid)) process.kill(gatewayPid, 'SIGKILL');
  });
  assert.notEqual(gatewayPid, npm.pid);
  assert.ok(isAlive(gatewayPid));
  return { npm, gatewayPid, pidFile };
}

test('stopping `npm start` by its pid (SIGTERM, SIGINT) stops the gateway gracefully', async (t) => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    const { npm, gatewayPid, pidFile } = await npmStart(t);
    npm.kill(signal);
    await exitOf(npm);
    await waitFor(() => !isAlive(gatewayPid), `the gateway to stop after ${signal} to npm`, 10_000);
    assert.throws(() => lstatSync(pidFile), /ENOENT/, 'a graceful stop removes the pid file');
  }
});

test('when npm dies of a signal it does not relay (SIGKILL, SIGHUP), the gateway stops gracefully too', async (t) => {
  for (const signal of ['SIGKILL', 'SIGHUP'] as const) {
    const { npm, gatewayPid, pidFile } = await npmStart(t);
    npm.kill(signal);
    await exitOf(npm);
    await waitFor(() => !isAlive(gatewayPid), `the gateway to stop after ${signal} to npm`, 10_000);
    assert.throws(() => lstatSync(pidFile), /ENOENT/, 'a graceful stop removes the pid file');
  }
});
