/**
 * The tests' throwaway OpenLDAP server: examples/ldap/directory.ts's slapd (its own config, database and
 * certificate in a temp directory, on free loopback ports), stopped with the test process however it ends.
 *
 * Without slapd the tests that need it skip with a message; with TOLLGATE_REQUIRE_POSTGRES=1 (set by
 * .ci/run: CI requires the services the tests start) that skip is a failure instead.
 */
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { Attribute, Change, Client } from 'ldapts';
import { BASE_DN, missingSlapdFiles, ROOT_DN, ROOT_PASSWORD, startDirectory, SUFFIX, type Directory } from '../../examples/ldap/directory.ts';

export { BASE_DN, SUFFIX };

const REQUIRED = process.env.TOLLGATE_REQUIRE_POSTGRES === '1';

export interface ThrowawaySlapd extends Directory {
  /** Replaces a user's password (as the directory's administrator). */
  setPassword(uid: string, password: string): Promise<void>;
}

/** Why the LDAP tests cannot run here, or undefined when they can. Throws where they must run (CI). */
export function slapdSkipReason(): string | undefined {
  const missing = missingSlapdFiles();
  if (!missing.length) return undefined;
  const reason = `OpenLDAP's server is not installed (missing ${missing.join(', ')}; Debian: apt-get install slapd ldap-utils)`;
  if (REQUIRED) throw new Error(`TOLLGATE_REQUIRE_POSTGRES=1 but ${reason}`);
  return `skipped: ${reason}`;
}

/** Users seeded as `uid=<name>,<BASE_DN>` with these passwords (Kong's spec binds as einstein). */
export async function startSlapd(users: Record<string, string>): Promise<ThrowawaySlapd> {
  const directory = await startDirectory(users);
  const start = async () => {
    await directory.start();
    watchdog(directory);
  };
  watchdog(directory);
  process.once('exit', () => {
    if (directory.pid) process.kill(directory.pid, 'SIGKILL');
    rmSync(directory.dir, { recursive: true, force: true });
  });
  return {
    ...directory,
    get pid() {
      return directory.pid;
    },
    start,
    async setPassword(uid, password) {
      const admin = new Client({ url: `ldap://127.0.0.1:${directory.port}` });
      try {
        await admin.bind(ROOT_DN, ROOT_PASSWORD);
        await admin.modify(`uid=${uid},${BASE_DN}`, new Change({ operation: 'replace', modification: new Attribute({ type: 'userPassword', values: [password] }) }));
      } finally {
        await admin.unbind();
      }
    },
  };
}

/** Stops slapd and removes its files once the test process is gone, however it ends (a killed runner runs no exit handler). */
function watchdog(directory: Directory): void {
  const pid = directory.pid;
  const stop = `[ "$(cat /proc/${pid}/comm 2>/dev/null)" = slapd ] && kill ${pid}`;
  const script = `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; ${stop}; sleep 1; rm -rf '${directory.dir}'`;
  spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' }).unref();
}
