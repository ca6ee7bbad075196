/**
 * Redemptions while PostgreSQL restarts (issue 28, item 7), on a gateway in a process of its own: clients
 * keep redeeming authorization codes and refresh tokens through `pg_ctl restart -m fast` and through a
 * stop of a few seconds. Every answer is a token or a clear 503 with Retry-After (never a 500, never a
 * dropped connection); the clients' retries succeed once the database is back, without restarting the
 * gateway; each grant ends with exactly one token, every token handed out works, and no grant is
 * redeemable again. And a redemption cut short mid-way by the restart leaves its code (or refresh token)
 * redeemable: the code is spent in the same step that issues its token.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { request, spawnGateway, startUpstream, type Reply, type SpawnedGateway, type Upstream } from '../../helpers/gateway.ts';
import { postgresForSuite, postgresSkipReason } from '../../helpers/postgres.ts';
import { waitFor } from '../../helpers/support.ts';
import { inParallel } from '../metering/catalogue-support.ts';

const PROVISION_KEY = 'restart-provision-key';
const REDIRECT_URI = 'https://app.test/cb';
const CLIENT = { client_id: 'app', client_secret: 'app-secret' };
/** How long a client waits before trying a grant again after a 503 (the gateway says 1 s; this keeps the test short). */
const RETRY_MS = 100;

/** A grant to redeem: an authorization code or a refresh token, for a user of its own. */
interface Grant {
  kind: 'code' | 'refresh';
  value: string;
  user: string;
  /** Every answer it got, in order: a status, or the transport error. */
  answers: string[];
  /** The access token of its redemption, once it got one. */
  token?: string;
}

describe('oauth2 redemptions while PostgreSQL restarts', { skip: postgresSkipReason() }, () => {
  const suite = postgresForSuite();
  let upstream: Upstream;
  before(async () => {
    upstream = await startUpstream();
  });
  after(() => upstream?.close());

  /** A gateway process on a fresh schema: one route protected by oauth2, and the client `app`. */
  async function gateway(schema: string): Promise<SpawnedGateway> {
    const gw = await spawnGateway({
      gateway: suite.pg.settings({ pg_schema: schema, db_update_frequency: 0.2, worker_processes: 1 }),
      services: [
        {
          name: 'api',
          url: upstream.url,
          routes: [{ name: 'api', paths: ['/api'], plugins: [{ name: 'oauth2', config: { scopes: ['read'], enable_authorization_code: true, enable_password_grant: true, provision_key: PROVISION_KEY } }] }],
        },
      ],
      consumers: [{ username: 'alice', oauth2_credentials: [{ name: 'App', ...CLIENT, redirect_uris: [REDIRECT_URI] }] }],
    });
    suite.track(async () => {
      gw.kill('SIGKILL');
      await gw.exited;
    });
    return gw;
  }

  const form = (url: string, params: Record<string, string>) =>
    request(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(params).toString() });

  async function newCode(gw: SpawnedGateway, user: string): Promise<Grant> {
    const reply = await form(gw.https + '/api/oauth2/authorize', { client_id: CLIENT.client_id, response_type: 'code', provision_key: PROVISION_KEY, authenticated_userid: user, scope: 'read' });
    assert.equal(reply.status, 200, reply.text);
    return { kind: 'code', value: new URL(reply.json().redirect_uri).searchParams.get('code')!, user, answers: [] };
  }

  async function newRefreshToken(gw: SpawnedGateway, user: string): Promise<Grant> {
    const reply = await form(gw.https + '/api/oauth2/token', { ...CLIENT, grant_type: 'password', provision_key: PROVISION_KEY, authenticated_userid: user, scope: 'read' });
    assert.equal(reply.status, 200, reply.text);
    return { kind: 'refresh', value: reply.json().refresh_token, user, answers: [] };
  }

  function redeem(gw: SpawnedGateway, grant: Grant): Promise<Reply> {
    const params: Record<string, string> = grant.kind === 'code' ? { grant_type: 'authorization_code', code: grant.value, redirect_uri: REDIRECT_URI } : { grant_type: 'refresh_token', refresh_token: grant.value };
    return form(gw.https + '/api/oauth2/token', { ...CLIENT, ...params });
  }

  /** A 503 says the database is away and when to try again, in the gateway's JSON error shape. */
  function assertUnavailable(reply: Reply): void {
    assert.equal(reply.status, 503, reply.text);
    assert.equal(reply.headers['retry-after'], '1');
    assert.match(reply.json().message, /unavailable; retry later/);
  }

  /**
   * Redeems `grant` as a client does: again after a 503 or a transport error, until it gets a token or a
   * refusal (which is right only when an earlier attempt may have succeeded unseen).
   */
  async function redeemUntilAnswered(gw: SpawnedGateway, grant: Grant): Promise<void> {
    for (;;) {
      let reply: Reply;
      try {
        reply = await redeem(gw, grant);
      } catch (err) {
        grant.answers.push((err as NodeJS.ErrnoException).code ?? String(err));
        await sleep(RETRY_MS);
        continue;
      }
      grant.answers.push(String(reply.status));
      if (reply.status === 200) return void (grant.token = reply.json().access_token);
      if (reply.status !== 503) return;
      assertUnavailable(reply);
      await sleep(RETRY_MS);
    }
  }

  /** Every token the gateway holds, by authenticated user (the admin API, page by page). */
  async function tokensByUser(gw: SpawnedGateway): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    for (let next: string | null = '/oauth2_tokens?size=1000'; next; ) {
      const page: { data: { authenticated_userid: string }[]; next: string | null } = (await request(gw.admin + next)).json();
      for (const row of page.data) counts.set(row.authenticated_userid, (counts.get(row.authenticated_userid) ?? 0) + 1);
      next = page.next;
    }
    return counts;
  }

  const outages = {
    'pg_ctl restart -m fast': () => suite.pg.restart(),
    'a stop of 3 s, then a start': async () => {
      await suite.pg.pause();
      await sleep(3_000);
      await suite.pg.resume();
    },
  };

  for (const [outage, interrupt] of Object.entries(outages)) {
    test(`${outage} while clients redeem: a token or a clear 503 each time, every grant redeemed exactly once once it is back`, async () => {
      const gw = await gateway(suite.schema('redeem'));
      const grants: Grant[] = [];
      for (let i = 0; i < 60; i++) grants.push(await newCode(gw, `code-user-${i}`), await newRefreshToken(gw, `refresh-user-${i}`));
      const pid = (await request(gw.admin + '/')).json().pid;

      // The outage starts once a few grants are redeemed, while the clients go on.
      let redeemed = 0;
      let interrupted: Promise<void> | undefined;
      await inParallel(grants, 4, async (grant) => {
        await redeemUntilAnswered(gw, grant);
        if (++redeemed === 10) interrupted = interrupt();
        await sleep(20);
      });
      assert.ok(interrupted, 'the database went away while clients redeemed');
      await interrupted;

      const answers = grants.flatMap((g) => g.answers);
      assert.deepEqual(answers.filter((a) => a !== '200' && a !== '503' && a !== '400'), [], 'no 500 and no dropped connection');
      assert.ok(answers.includes('503'), 'some redemptions met the outage');
      // A refusal only after an attempt whose success the client did not see (its answer was a 503).
      const refused = grants.filter((g) => g.token === undefined);
      assert.ok(refused.every((g) => g.answers.at(-1) === '400' && g.answers.includes('503')), `refused at once: ${refused.map((g) => g.answers.join(' ')).join('; ')}`);
      assert.ok(refused.length <= 4, `${refused.length} grants spent by an unseen redemption`);

      // Exactly one token per grant (the code or the refresh token was exchanged once), every one handed out works.
      const tokens = await tokensByUser(gw);
      assert.deepEqual(grants.filter((g) => tokens.get(g.user) !== 1).map((g) => `${g.user}: ${tokens.get(g.user) ?? 0}`), []);
      for (const grant of grants.filter((g) => g.token)) {
        assert.equal((await request(gw.http + '/api/x', { headers: { authorization: `Bearer ${grant.token}` } })).status, 200, `${grant.user}'s token works`);
      }
      for (const grant of grants) {
        const again = await redeem(gw, grant);
        assert.equal(again.status, 400, `${grant.user}'s ${grant.kind} is not redeemable twice`);
        assert.equal(again.json().error, 'invalid_grant');
      }
      assert.equal((await request(gw.admin + '/')).json().pid, pid, 'the same gateway process served throughout');
      assert.equal(gw.child.exitCode, null);
    });
  }

  test('a redemption cut short by the restart changes nothing: the code, or the refresh token, is redeemed afterwards', async () => {
    const schema = suite.schema('cut_short');
    const gw = await gateway(schema);
    // Holds the write of a new access token's key for a minute, so that the restart comes in the middle
    // of the redemption's write (the code's, or the old refresh token's, deletion is in the same transaction).
    await suite.pg.sql(`CREATE FUNCTION ${schema}.hold_new_tokens() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.key LIKE '%acc:%' THEN PERFORM pg_sleep(60); END IF; RETURN NEW; END $$`);
    const hold = () => suite.pg.sql(`CREATE TRIGGER hold BEFORE INSERT ON ${schema}.tollgate_store FOR EACH ROW EXECUTE FUNCTION ${schema}.hold_new_tokens()`);
    const release = () => suite.pg.sql(`DROP TRIGGER hold ON ${schema}.tollgate_store`);
    const held = async () => (await suite.pg.sql("SELECT 1 FROM pg_stat_activity WHERE usename = 'tollgate' AND wait_event = 'PgSleep'")).length > 0;

    for (const grant of [await newCode(gw, 'cut-code-user'), await newRefreshToken(gw, 'cut-refresh-user')]) {
      await hold();
      const cut = redeem(gw, grant);
      await waitFor(held, `the ${grant.kind}'s redemption to be writing`, 10_000);
      await suite.pg.restart();
      assertUnavailable(await cut);
      await release();

      await redeemUntilAnswered(gw, grant);
      assert.equal(grant.answers.at(-1), '200', `the ${grant.kind} is redeemed after the restart (answers: ${grant.answers.join(' ')})`);
      assert.equal((await request(gw.http + '/api/x', { headers: { authorization: `Bearer ${grant.token}` } })).status, 200);
      assert.equal((await redeem(gw, grant)).status, 400, 'and only once');
    }
  });
});
