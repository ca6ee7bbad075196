/**
 * Docs that work when pasted: every fenced sh/bash/shell block of README.md and docs/*.md runs, in
 * order, in one bash session per document (`set -euo pipefail`), in a fresh copy of the repository,
 * against the programs the document itself starts in its `background` blocks (the gateway, the
 * example upstream, the example authorization page). A document fails when a command fails, or when
 * curl gets a 5xx, a 426 (an https-only route called over http), or more 4xx answers in a block than
 * the block documents as error outputs (comment lines showing an error body, `# {"error"…`,
 * `# {"message"…` or a problem, `# {"type"…`). The documented ports are mapped to free ones in the copy, so the run never
 * collides with a gateway already running on the machine.
 *
 * The documents are shared out between a few test files (`pasteTests`), each run by its own runner,
 * so that no file's documents together take longer than the test timeout of one file.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { basename, extname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { backgroundCommands, shellBlocks, type ShellBlock } from '../helpers/doc-blocks.ts';
import { tempDir } from '../helpers/gateway.ts';

const ROOT = resolve(import.meta.dirname, '../..');
export const DOCUMENTS = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
export const FLAGS = new Set(['no-run', 'background']);
/** Ports the documents and example configs name: the gateway's, the example upstream's and pages'. */
const DOCUMENTED_PORTS = [8000, 8443, 9080, 8001, 9443, 9001, 3000, 3001, 3002, 3003, 3004, 3301, 3400, 5555, 4318, 8125, 3389, 3636];
/** Not copied: installed packages (linked instead), git metadata, data directories of earlier runs. */
const NOT_COPIED = new Set(['node_modules', '.git', 'data']);
const BLOCK_TIMEOUT_MS = 120_000;
const READY_TIMEOUT_MS = 60_000;

export function blocksOf(document: string): ShellBlock[] {
  return shellBlocks(readFileSync(join(ROOT, document), 'utf8'), document);
}

async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: count }, () => new Promise<net.Server>((r) => {
      const server = net.createServer();
      server.listen(0, '127.0.0.1', () => r(server));
    })),
  );
  const ports = servers.map((s) => (s.address() as net.AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

/**
 * `127.0.0.1:8443` -> `127.0.0.1:<free port>`: after any host name or address (curl's `--resolve
 * name:port:address` and `https://name:port/` too), `PORT=3001`, the examples' `PORT ?? 3000`, and a
 * config's `port: 8125` (statsd's destination), `port: 3002` (tcp-log's and udp-log's) or `ldap_port: 3389`.
 */
export function mapPorts(text: string, ports: Map<number, number>): string {
  const list = [...ports.keys()].join('|');
  return text
    .replace(new RegExp(`\\b([a-z0-9][a-z0-9.-]*):(${list})\\b`, 'gi'), (_, host, port) => `${host}:${ports.get(Number(port))}`)
    .replace(new RegExp(`\\?\\? (${list})\\b`, 'g'), (_, port) => `?? ${ports.get(Number(port))}`)
    .replace(new RegExp(`\\bPORT=(${list})\\b`, 'g'), (_, port) => `PORT=${ports.get(Number(port))}`)
    .replace(new RegExp(`\\b(ldap_)?port: (${list})\\b`, 'g'), (_, ldap = '', port) => `${ldap}port: ${ports.get(Number(port))}`);
}

/** A copy of the repository (its node_modules linked) whose docs and examples use `ports`. */
function copyRepository(ports: Map<number, number>): string {
  const dir = tempDir('tollgate-docs-');
  cpSync(ROOT, dir, { recursive: true, filter: (source) => !NOT_COPIED.has(basename(source)) || source === ROOT });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  const rewrite = (path: string) => writeFileSync(path, mapPorts(readFileSync(path, 'utf8'), ports));
  const walk = (path: string) => {
    for (const entry of readdirSync(path, { withFileTypes: true })) {
      const full = join(path, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (['.md', '.yaml', '.yml', '.ts'].includes(extname(entry.name))) rewrite(full);
    }
  };
  for (const file of ['README.md', 'gateway.yaml']) rewrite(join(dir, file));
  for (const folder of ['docs', 'examples']) walk(join(dir, folder));
  return dir;
}

/** The environment of a user's shell: nothing of npm's or the test runner's. */
function userEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith('npm_') && !['NODE_TEST_CONTEXT', 'GATEWAY_CONFIG', 'NODE_OPTIONS'].includes(key)) env[key] = value;
  }
  return env;
}

/** The programs of `background` blocks, each in its own process group (npm and its children). */
class Background {
  private readonly running: { command: string; child: ChildProcess; output: () => string }[] = [];

  constructor(
    private readonly cwd: string,
    private readonly env: NodeJS.ProcessEnv,
  ) {}

  async start(command: string): Promise<void> {
    const child = spawn('bash', ['-c', command], { cwd: this.cwd, env: this.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let changedAt = Date.now();
    const collect = (c: Buffer) => {
      out += c;
      changedAt = Date.now();
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    this.running.push({ command, child, output: () => out });
    const deadline = Date.now() + READY_TIMEOUT_MS;
    // Ready once it said where it listens and then went quiet (a gateway prints one line per listener).
    while (!(out.includes('listening on') && Date.now() - changedAt > 300)) {
      if (child.exitCode !== null || child.signalCode !== null) assert.fail(`\`${command}\` exited (${child.exitCode ?? child.signalCode}):\n${out}`);
      if (Date.now() > deadline) assert.fail(`\`${command}\` did not say it was listening within ${READY_TIMEOUT_MS / 1000} s:\n${out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** SIGTERM to each group (a graceful stop), SIGKILL to what is left after 15 s. */
  async stopAll(): Promise<void> {
    await Promise.all(this.running.map(async ({ child }) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      signalGroup(child, 'SIGTERM');
      const timer = setTimeout(() => signalGroup(child, 'SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
      // Whatever the group's leader left behind (tsx runs the script in a child).
      signalGroup(child, 'SIGKILL');
    }));
  }

  outputs(): string {
    return this.running.map((r) => `--- ${r.command}\n${r.output()}`).join('\n');
  }
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // The group is gone.
  }
}

interface CurlCall {
  status: number;
  url: string;
}

/**
 * One bash session for a whole document, so variables set in one block serve the next, as in a
 * terminal. curl reports each answer's status on stderr (curl >= 7.63 `%{stderr}`), out of the way
 * of what the command captures.
 */
class DocShell {
  private readonly bash: ChildProcess;
  private stdout = '';
  private stderr = '';
  private blocks = 0;

  constructor(private readonly cwd: string, env: NodeJS.ProcessEnv) {
    this.bash = spawn('bash', ['--noprofile', '--norc'], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.bash.stdout!.on('data', (c) => (this.stdout += c));
    this.bash.stderr!.on('data', (c) => (this.stderr += c));
    this.bash.stdin!.write(
      [
        'set -euo pipefail',
        'curl() { command curl -w "%{stderr}@@curl %{http_code} %{url_effective}\\n" "$@"; }',
        '',
      ].join('\n'),
    );
  }

  async run(block: ShellBlock): Promise<{ output: string; calls: CurlCall[] }> {
    const n = ++this.blocks;
    mkdirSync(join(this.cwd, '.doc-runner'), { recursive: true });
    const file = join(this.cwd, '.doc-runner', `block-${n}.sh`);
    writeFileSync(file, block.code);
    const marker = `@@block ${n} done@@`;
    const [outStart, errStart] = [this.stdout.length, this.stderr.length];
    this.bash.stdin!.write(`source '${file}'\necho; echo '${marker}'; echo '${marker}' >&2\n`);
    const deadline = Date.now() + BLOCK_TIMEOUT_MS;
    const where = `${block.file}:${block.line}`;
    while (!(this.stdout.includes(marker, outStart) && this.stderr.includes(marker, errStart))) {
      const output = () => this.stdout.slice(outStart) + this.stderr.slice(errStart);
      if (this.bash.exitCode !== null) assert.fail(`the block at ${where} failed (exit ${this.bash.exitCode}):\n${block.code}\n--- output\n${output()}`);
      if (Date.now() > deadline) assert.fail(`the block at ${where} ran for more than ${BLOCK_TIMEOUT_MS / 1000} s:\n${output()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const stderr = this.stderr.slice(errStart, this.stderr.indexOf(marker, errStart));
    const calls = [...stderr.matchAll(/^@@curl (\d{3}) (.*)$/gm)].map((m) => ({ status: Number(m[1]), url: m[2] }));
    return { output: this.stdout.slice(outStart, this.stdout.indexOf(marker, outStart)) + stderr, calls };
  }

  close(): void {
    this.bash.kill('SIGKILL');
  }
}

/** Comment lines that show an error answer: the block means to get that many 4xx. */
function documentedErrors(block: ShellBlock): number {
  return block.code.split('\n').filter((l) => /^\s*#\s*\{"(error|message|type)"/.test(l)).length;
}

/** The curl answers that say the block does not work as documented, with why. */
function brokenCalls(block: ShellBlock, calls: CurlCall[]): string[] {
  const problems: string[] = [];
  for (const call of calls) {
    if (call.status >= 500) problems.push(`${call.url} answered ${call.status}, a server error`);
    if (call.status === 426) problems.push(`${call.url} answered 426: an https-only route called over http`);
    if (call.status === 0) problems.push(`${call.url}: no answer`);
  }
  const refused = calls.filter((c) => c.status >= 400 && c.status < 500 && c.status !== 426);
  if (refused.length > documentedErrors(block)) {
    problems.push(`${refused.length} answers were 4xx where the block documents ${documentedErrors(block)} error(s): ${refused.map((c) => `${c.url} ${c.status}`).join(', ')}`);
  }
  return problems;
}

async function runDocument(document: string): Promise<void> {
  const ports = new Map<number, number>();
  const free = await freePorts(DOCUMENTED_PORTS.length);
  DOCUMENTED_PORTS.forEach((port, i) => ports.set(port, free[i]));
  const dir = copyRepository(ports);
  const env = userEnvironment();
  const background = new Background(dir, env);
  const shell = new DocShell(dir, env);
  try {
    for (const block of shellBlocks(readFileSync(join(dir, document), 'utf8'), document)) {
      if (block.flags.includes('no-run')) continue;
      if (block.flags.includes('background')) {
        for (const command of backgroundCommands(block)) await background.start(command);
        continue;
      }
      const { output, calls } = await shell.run(block);
      const problems = brokenCalls(block, calls);
      if (problems.length > 0) assert.fail(`the block at ${document}:${block.line}: ${problems.join('; ')}\n${block.code}\n--- output\n${output}\n--- programs\n${background.outputs()}`);
    }
  } finally {
    shell.close();
    await background.stopAll();
  }
}

/** How many test files share the documents out: docs.test.ts and docs-paste-1, -2.test.ts. */
export const PASTE_SHARDS = 3;

/** Registers the paste test of every `shards`-th document, starting at `shard`. */
export function pasteTests(shard: number, shards: number): void {
  DOCUMENTS.forEach((document, i) => {
    if (i % shards !== shard) return;
    const runnable = blocksOf(document).filter((b) => !b.flags.includes('no-run'));
    if (runnable.length === 0) return;
    test(`the commands of ${document} work when pasted`, { timeout: 600_000 }, () => runDocument(document));
  });
}
