/**
 * Kong's syslog (spec/03-plugins/05-syslog/01-log_spec.lua) against a real syslog socket: the example
 * receiver (examples/syslog-receiver.py) binds a Unix datagram socket as /dev/log is, and the plugin's
 * logger processes write to it. The PRI of each response class, the `kong` tag and the gateway process's
 * id, the entry equal to what file-log writes for the same request, `log_level`, an entry too large for a
 * line (counted, not split), a socket nobody listens on (requests answered, lines sent once it is there),
 * a logger that dies started again, and the logger processes ended by a reload and by stopping the gateway.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, startUpstream, tempDir, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { closedPort, portOf, rawExchange, waitFor } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';

const RECEIVER = resolve(import.meta.dirname, '../../../examples/syslog-receiver.py');

interface SyslogLine {
  priority: number;
  tag: string;
  pid: number;
  entry: any;
}

interface Receiver {
  lines: SyslogLine[];
  close(): Promise<void>;
}

/** `<PRI>Mmm dd hh:mm:ss TAG[PID]: MESSAGE`, as syslog(3) sends to /dev/log. */
const LOCAL_SYSLOG_LINE = /^<(\d+)>\w{3} [ \d]\d \d\d:\d\d:\d\d (\S+)\[(\d+)\]: (.*)$/;

function parseLine(text: string): SyslogLine {
  const match = LOCAL_SYSLOG_LINE.exec(text);
  assert.ok(match, `not a local syslog line: ${text.slice(0, 200)}`);
  return { priority: Number(match[1]), tag: match[2], pid: Number(match[3]), entry: JSON.parse(match[4]) };
}

/** The example receiver on `path`, in a process group of its own (the python3 launcher may fork). */
async function startReceiver(path: string): Promise<Receiver> {
  const child: ChildProcess = spawn('python3', [RECEIVER, path], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: SyslogLine[] = [];
  let buffered = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const parts = (buffered + chunk.toString()).split('\n');
    buffered = parts.pop()!;
    lines.push(...parts.map(parseLine));
  });
  let said = '';
  child.stderr!.on('data', (chunk: Buffer) => (said += chunk));
  await waitFor(() => said.includes('listening on') || child.exitCode !== null, 'the syslog receiver', 15_000);
  assert.equal(child.exitCode, null, said);
  const exited = new Promise((done) => child.once('exit', done));
  return {
    lines,
    async close() {
      process.kill(-child.pid!, 'SIGTERM');
      await exited;
    },
  };
}

/** The logger processes writing to `socket`: their ids and their parents' (the gateway processes). */
function loggersFor(socket: string): { pid: number; parent: number }[] {
  return execFileSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' })
    .split('\n')
    .map((row) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(row))
    .filter((row) => row && row[3].startsWith('logger ') && row[3].endsWith(` ${socket}`))
    .map((row) => ({ pid: Number(row![1]), parent: Number(row![2]) }));
}

const byUri = (receiver: Receiver, uri: string) => receiver.lines.filter((line) => line.entry.request.uri === uri);
const lineFor = (receiver: Receiver, uri: string) => waitFor(() => byUri(receiver, uri)[0], `the line of ${uri}`);

/** local3 (19): 200 -> notice (5), 4xx -> warning (4), 5xx -> crit (2). */
const BY_CLASS = { facility: 'local3', log_level: 'debug', successful_severity: 'notice', client_errors_severity: 'warning', server_errors_severity: 'crit' };

/** Successes at err, sent; client errors at warning, not sent. */
const FILTERED = { log_level: 'err', successful_severity: 'err', client_errors_severity: 'warning' };

describe('syslog', () => {
  const dir = tempDir();
  const socket = join(dir, 'log.sock');
  const absentSocket = join(dir, 'absent.sock');
  const fileLog = join(dir, 'entries.log');
  let upstream: Upstream;
  let receiver: Receiver;
  let gw: TestGateway | undefined;
  let config: Record<string, any>;

  before(async () => {
    upstream = await startUpstream();
    receiver = await startReceiver(socket);
    const syslog = (fields: Record<string, unknown>, path = socket) => ({ name: 'syslog', config: { socket_path: path, ...fields } });
    config = {
      // Room for a request whose entry is larger than a syslog line may be.
      gateway: { max_header_size: 128 * 1024 },
      services: [
        {
          name: 'echo', url: upstream.url,
          routes: [
            { name: 'ok', paths: ['/ok'], plugins: [syslog(BY_CLASS), { name: 'file-log', config: { path: fileLog } }] },
            { name: 'denied', paths: ['/denied'], plugins: [syslog(BY_CLASS), { name: 'key-auth', config: {} }] },
            // Kong's spec: nothing less severe than log_level (err) is sent, a warning included.
            { name: 'filtered', paths: ['/filtered'], plugins: [syslog(FILTERED)] },
            { name: 'filtered-denied', paths: ['/filtered-denied'], plugins: [syslog(FILTERED), { name: 'key-auth', config: {} }] },
            { name: 'absent', paths: ['/absent'], plugins: [syslog({}, absentSocket)] },
          ],
        },
        { name: 'down', url: `http://127.0.0.1:${await closedPort()}`, routes: [{ name: 'broken', paths: ['/broken'], plugins: [syslog(BY_CLASS)] }] },
      ],
    };
    gw = await startGateway(config);
  });
  after(async () => {
    await gw?.stop();
    await Promise.all([receiver?.close(), upstream?.close()]);
  });

  test("each response class at its severity in the facility, tagged kong with the gateway process's id", async () => {
    assert.equal((await request(`${gw!.http}/ok/class`)).status, 200);
    assert.equal((await request(`${gw!.http}/denied/class`)).status, 401);
    assert.equal((await request(`${gw!.http}/broken/class`)).status, 502);
    const [ok, denied, broken] = await Promise.all(['/ok/class', '/denied/class', '/broken/class'].map((uri) => lineFor(receiver, uri)));
    assert.deepEqual([ok.priority, denied.priority, broken.priority], [19 * 8 + 5, 19 * 8 + 4, 19 * 8 + 2]);
    assert.equal(ok.tag, 'kong');
    assert.ok(loggersFor(socket).some((logger) => logger.parent === ok.pid), 'the pid is that of the gateway process running logger');
  });

  test("the entry is Kong's serialized request, as file-log writes it", async () => {
    assert.equal((await request(`${gw!.http}/ok/entry?x=1`, { headers: { authorization: 'Bearer secret' } })).status, 200);
    const line = await lineFor(receiver, '/ok/entry?x=1');
    const written = await waitFor(
      () => readFileSync(fileLog, 'utf8').split('\n').filter(Boolean).map((text) => JSON.parse(text)).find((entry) => entry.request.uri === '/ok/entry?x=1'),
      "file-log's line",
    );
    // The latencies are measured when each plugin serializes the request, as Kong's are.
    const withoutLatencies = ({ latencies, ...entry }: any) => (assert.equal(typeof latencies.request, 'number'), entry);
    assert.deepEqual(withoutLatencies(line.entry), withoutLatencies(written));
    assert.equal(line.entry.request.headers.authorization, 'REDACTED');
    assert.equal(line.entry.route.name, 'ok');
  });

  test('nothing less severe than log_level is sent', async () => {
    // Pipelined on one connection: one gateway process, one logger, lines in order.
    const pipelined = ['/filtered-denied/quiet', '/filtered/loud'].map((path) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`).join('');
    const raw = await rawExchange(portOf(gw!.http), pipelined.replace(/\r\n\r\n$/, '\r\nConnection: close\r\n\r\n'));
    assert.deepEqual([...raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]), ['401', '200']);
    assert.equal((await lineFor(receiver, '/filtered/loud')).priority, 8 + 3);
    assert.deepEqual(byUri(receiver, '/filtered-denied/quiet'), []);
  });

  test('an entry over 64 KiB is lost and counted, not split', async () => {
    // Refused by key-auth, so the header never goes to the upstream, which would refuse it.
    assert.equal((await request(`${gw!.http}/denied/large`, { headers: { 'x-large': 'x'.repeat(70_000) } })).status, 401);
    const counted = /tollgate_syslog_lost_lines_total\{[^}]*reason="too_large"\} 1\b/;
    await waitFor(async () => counted.test((await request(`${gw!.admin}/metrics`)).text), 'the entry counted as too large');
    await request(`${gw!.http}/denied/after-large`);
    await lineFor(receiver, '/denied/after-large');
    assert.deepEqual(byUri(receiver, '/denied/large'), []);
  });

  test('a socket nobody listens on: requests answered; lines arrive once a receiver binds it', async () => {
    for (let i = 0; i < 20; i++) assert.equal((await request(`${gw!.http}/absent/before`)).status, 200);
    const late = await startReceiver(absentSocket);
    try {
      // Each probe sends another request: logger tries the socket again for each line.
      const line = await waitFor(async () => (await request(`${gw!.http}/absent/after`), byUri(late, '/absent/after')[0]), 'a line once the socket is there');
      assert.equal(line.priority, 8 + 6);
      assert.deepEqual(byUri(late, '/absent/before'), []);
    } finally {
      await late.close();
    }
  });

  test('a logger that exits is started again', async () => {
    const before = loggersFor(socket);
    assert.ok(before.length > 0);
    for (const logger of before) process.kill(logger.pid, 'SIGKILL');
    const line = await waitFor(async () => (await request(`${gw!.http}/ok/again`), byUri(receiver, '/ok/again')[0]), 'a line through a new logger');
    assert.equal(line.priority, 19 * 8 + 5);
    assert.ok(loggersFor(socket).every((logger) => !before.some((old) => old.pid === logger.pid)));
  });

  test('a reload ends the loggers of a socket no longer named; stopping the gateway ends the others', async () => {
    await request(`${gw!.http}/absent/started`);
    await waitFor(() => loggersFor(absentSocket).length > 0, 'the logger of the absent socket');
    const routes = config.services[0].routes.filter((route: any) => route.name !== 'absent');
    assert.equal(await gw!.reload({ ...config, services: [{ ...config.services[0], routes }, config.services[1]] }), true);
    await waitFor(() => loggersFor(absentSocket).length === 0, 'the logger ended by the reload');
    await request(`${gw!.http}/ok/reloaded`);
    await lineFor(receiver, '/ok/reloaded');
    await gw!.stop();
    gw = undefined;
    assert.deepEqual(loggersFor(socket), []);
  });
});

test("syslog config: Kong's fields and defaults; Lua refused", async () => {
  assert.deepEqual(await pluginConfigErrors('syslog', {}), []);
  assert.deepEqual(await pluginConfigErrors('syslog', { log_level: 'warn' }), ['config.log_level: expected one of: debug, info, notice, warning, err, crit, alert, emerg']);
  assert.deepEqual(await pluginConfigErrors('syslog', { facility: 'local8' }), [
    'config.facility: expected one of: auth, authpriv, cron, daemon, ftp, kern, lpr, mail, news, syslog, user, uucp, local0, local1, local2, local3, local4, local5, local6, local7',
  ]);
  assert.deepEqual(await pluginConfigErrors('syslog', { socket_path: '/' + 'a'.repeat(107) }), ['config.socket_path: length must be at most 107']);
  const [lua] = await pluginConfigErrors('syslog', { custom_fields_by_lua: { a: 'return 1' } });
  assert.match(lua, /Tollgate does not run Lua/);
});
