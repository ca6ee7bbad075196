/**
 * A throwaway OpenLDAP directory: Debian's slapd (`apt-get install slapd ldap-utils`) run from a slapd.conf
 * written into a fresh temp directory, an mdb database seeded with slapadd, plain LDAP (StartTLS offered)
 * and LDAPS on loopback, a self-signed certificate for localhost / 127.0.0.1. Nothing of the machine's own
 * slapd is used. For docs/authentication.md's example (serve.ts) and the ldap-auth tests.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import selfsigned from 'selfsigned';

export const SLAPD = '/usr/sbin/slapd';
const SLAPADD = '/usr/sbin/slapadd';
const SCHEMAS = ['core', 'cosine', 'inetorgperson'].map((name) => `/etc/ldap/schema/${name}.schema`);

export const SUFFIX = 'dc=ldap,dc=tollgate,dc=test';
/** Where the users are: `uid=<name>,<BASE_DN>`. */
export const BASE_DN = `ou=scientists,${SUFFIX}`;
export const ROOT_DN = `cn=admin,${SUFFIX}`;
export const ROOT_PASSWORD = 'directory-admin-change-me';

export interface Directory {
  /** Plain LDAP (StartTLS offered). */
  port: number;
  /** LDAP over TLS. */
  ldapsPort: number;
  /** slapd's process id while it runs. */
  readonly pid: number | undefined;
  /** The temp directory holding the config, the database and the certificate. */
  dir: string;
  /** Stops the server, keeping its database; `start` serves it again on the same ports. */
  pause(): Promise<void>;
  start(): Promise<void>;
  /** Stops the server and removes its directory. */
  stop(): Promise<void>;
}

/** The files slapd needs that are missing here (empty when it can run). */
export function missingSlapdFiles(): string[] {
  return [SLAPD, SLAPADD, ...SCHEMAS].filter((path) => !existsSync(path));
}

/** Seeds `users` (name → password) and starts slapd on `ports` (0: a free one each). */
export async function startDirectory(users: Record<string, string>, ports: { port?: number; ldapsPort?: number } = {}): Promise<Directory> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-slapd-'));
  mkdirSync(join(dir, 'db'));
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }] }],
  });
  writeFileSync(join(dir, 'cert.pem'), pems.cert);
  writeFileSync(join(dir, 'key.pem'), pems.private);
  const configFile = join(dir, 'slapd.conf');
  writeFileSync(configFile, slapdConf(dir));
  writeFileSync(join(dir, 'seed.ldif'), seed(users));
  const seeded = spawnSync(SLAPADD, ['-f', configFile, '-l', join(dir, 'seed.ldif')], { encoding: 'utf8' });
  if (seeded.status !== 0) throw new Error(`slapadd failed: ${seeded.stderr}`);
  const port = ports.port || (await freePort());
  const ldapsPort = ports.ldapsPort || (await freePort());
  let child: ChildProcess | undefined;
  const start = async () => {
    // -d 0: in the foreground, so it is this process's child and stops with it.
    child = spawn(SLAPD, ['-f', configFile, '-h', `ldap://127.0.0.1:${port}/ ldaps://127.0.0.1:${ldapsPort}/`, '-d', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let errors = '';
    child.stderr!.on('data', (c) => (errors += c));
    await waitUntilListening([port, ldapsPort], child, () => errors);
  };
  const pause = async () => {
    const running = child;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    const exited = new Promise((resolve) => running.once('exit', resolve));
    running.kill('SIGTERM');
    await exited;
  };
  try {
    await start();
  } catch (err) {
    child?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    port,
    ldapsPort,
    get pid() {
      return child?.exitCode === null ? child.pid : undefined;
    },
    dir,
    pause,
    start,
    async stop() {
      await pause();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function slapdConf(dir: string): string {
  return [
    ...SCHEMAS.map((schema) => `include ${schema}`),
    `pidfile ${join(dir, 'slapd.pid')}`,
    `TLSCertificateFile ${join(dir, 'cert.pem')}`,
    `TLSCertificateKeyFile ${join(dir, 'key.pem')}`,
    'modulepath /usr/lib/ldap',
    'moduleload back_mdb',
    'database mdb',
    `suffix "${SUFFIX}"`,
    `rootdn "${ROOT_DN}"`,
    `rootpw ${ROOT_PASSWORD}`,
    `directory ${join(dir, 'db')}`,
    // The seeded entries need kilobytes: a small memory map.
    'maxsize 10485760',
    '',
  ].join('\n');
}

function seed(users: Record<string, string>): string {
  const entries = [
    [`dn: ${SUFFIX}`, 'objectClass: dcObject', 'objectClass: organization', 'o: tollgate', 'dc: ldap'],
    [`dn: ${BASE_DN}`, 'objectClass: organizationalUnit', 'ou: scientists'],
    ...Object.entries(users).map(([uid, password]) => [`dn: uid=${uid},${BASE_DN}`, 'objectClass: inetOrgPerson', `uid: ${uid}`, `cn: ${uid}`, `sn: ${uid}`, `userPassword: ${password}`]),
  ];
  return entries.map((lines) => lines.join('\n')).join('\n\n') + '\n';
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function waitUntilListening(ports: number[], child: ChildProcess, errors: () => string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await Promise.all(ports.map(accepts))).every(Boolean)) {
    if (child.exitCode !== null) throw new Error(`slapd exited (${child.exitCode}): ${errors()}`);
    if (Date.now() > deadline) throw new Error(`slapd did not listen on ${ports.join(' and ')} within 15 s: ${errors()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
