/**
 * Kong's ldap-auth cases (spec/03-plugins/20-ldap-auth/01-access, 02-invalidations, 02-schema) against a
 * real OpenLDAP server started here (plain, StartTLS and LDAPS) and a real gateway: Kong's 401 and
 * WWW-Authenticate (LDAP, a custom header_type, realm), malformed and partial credentials, Authorization and
 * Proxy-Authorization, gRPC, the identity headers (a credential, no consumer), hide_credentials, anonymous,
 * logical AND/OR with key-auth; the verdict cache (a stopped directory still admits what it admitted, a
 * changed password waits for cache_ttl); a dead or silent directory is a 500 that holds no other request.
 */
import assert from 'node:assert/strict';
import { createServer, type Server, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import { unary } from '../../fixtures/grpc-echo.ts';
import { startGatewayOnHttpAndGrpcEcho, type GatewayOnHttpAndGrpcEcho } from '../../fixtures/http-and-grpc-echo.ts';
import { aroundTests, request, type Reply, type RequestOptions } from '../../helpers/gateway.ts';
import { BASE_DN, slapdSkipReason, startSlapd, SUFFIX, type ThrowawaySlapd } from '../../helpers/slapd.ts';
import { closedPort, waitFor } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';

const ANONYMOUS_ID = '3d5e7a52-0000-4000-8000-00000000a0a0';
const MISSING_ANONYMOUS = '3d5e7a52-0000-4000-8000-00000000dead';
const USERS = { einstein: 'password', curie: 'radium', newton: 'gravity', bohr: 'atom' };

const ldap = (userPass: string, scheme = 'ldap') => `${scheme} ${Buffer.from(userPass).toString('base64')}`;

interface Fixture extends GatewayOnHttpAndGrpcEcho {
  slapd: ThrowawaySlapd;
}

/** A directory that accepts connections and never answers. */
async function silentServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

function config(slapd: ThrowawaySlapd, silentPort: number, deadPort: number) {
  return (upstreamUrl: string, grpcTarget: string): Record<string, any> => {
    const directory = { ldap_host: '127.0.0.1', ldap_port: slapd.port, base_dn: BASE_DN, attribute: 'uid' };
    const route = (name: string, settings: Record<string, unknown> = {}, extra: Record<string, unknown>[] = []) => ({
      name,
      hosts: [`${name}.test`],
      plugins: [{ name: 'ldap-auth', config: { ...directory, ...settings } }, ...extra],
    });
    return {
      services: [
        {
          name: 'echo',
          url: upstreamUrl,
          routes: [
            route('ldap1'),
            route('suffix', { base_dn: SUFFIX }),
            route('ldap2', { hide_credentials: true, realm: 'test-ldap' }),
            route('ldap3', { anonymous: ANONYMOUS_ID }),
            route('ldap4', { anonymous: MISSING_ANONYMOUS }),
            route('ldap5', { header_type: 'Basic' }),
            route('ldap7', { anonymous: 'no-body' }),
            route('ldap8', { header_type: 'Basic', realm: 'test-ldap' }),
            route('starttls', { start_tls: true }),
            route('ldaps', { ldaps: true, ldap_port: slapd.ldapsPort }),
            // Kong's cache key leaves the TLS settings out: another cache_ttl keeps this route's verdicts apart from the ldaps route's.
            route('verified', { ldaps: true, ldap_port: slapd.ldapsPort, verify_ldap_host: true, cache_ttl: 59 }),
            route('cached', { cache_ttl: 600 }),
            route('short', { cache_ttl: 1 }),
            route('silent', { ldap_port: silentPort, timeout: 300 }),
            route('dead', { ldap_port: deadPort, timeout: 1000 }),
            route('logical-and', {}, [{ name: 'key-auth' }]),
            route('logical-or', { anonymous: 'Anonymous' }, [{ name: 'key-auth', config: { anonymous: 'Anonymous' } }]),
          ],
        },
        {
          name: 'grpc',
          url: `grpc://${grpcTarget}`,
          routes: [{ name: 'grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'], plugins: [{ name: 'ldap-auth', config: directory }] }],
        },
      ],
      consumers: [
        { id: ANONYMOUS_ID, username: 'no-body' },
        { username: 'Anonymous' },
        { username: 'Mickey', keyauth_credentials: [{ key: 'Mouse' }] },
      ],
    };
  };
}

describe('Kong ldap-auth against a real slapd', { skip: slapdSkipReason() }, () => {
  const fx = aroundTests<Fixture>(async () => {
    const slapd = await startSlapd(USERS);
    const silent = await silentServer();
    try {
      const started = await startGatewayOnHttpAndGrpcEcho(config(slapd, silent.port, await closedPort()));
      return {
        ...started,
        slapd,
        async close() {
          await started.close();
          await silent.close();
          await slapd.stop();
        },
      };
    } catch (err) {
      await silent.close();
      await slapd.stop();
      throw err;
    }
  });

  const proxy = (host: string, path: string, options: RequestOptions = {}): Promise<Reply> =>
    request(fx.gw.http + path, { ...options, headers: { host: `${host}.test`, ...options.headers } });

  const echoed = (reply: Reply): Record<string, string | undefined> => {
    assert.equal(reply.status, 200, reply.text);
    return reply.json().headers;
  };

  const assertRefused = (reply: Reply, challenge = 'LDAP') => {
    assert.equal(reply.status, 401, reply.text);
    assert.equal(reply.headers['www-authenticate'], challenge);
    assert.equal(reply.json().message, 'Unauthorized');
  };

  describe('unauthorized', () => {
    it('LD01 no credentials: 401 Unauthorized with `WWW-Authenticate: LDAP`', async () => {
      assertRefused(await proxy('ldap1', '/get'));
    });

    it('LD02 a value in the wrong form, in Authorization or Proxy-Authorization, or without credentials', async () => {
      assertRefused(await proxy('ldap1', '/get', { headers: { authorization: 'abcd' } }));
      assertRefused(await proxy('ldap1', '/get', { headers: { 'proxy-authorization': 'abcd' } }));
      assertRefused(await proxy('ldap1', '/get', { headers: { authorization: 'ldap ' } }));
      assertRefused(await proxy('ldap1', '/get', { headers: { authorization: 'ldap not*base64' } }));
    });

    it('LD03 another scheme, no password, a wrong password, a very long one, a second `:`', async () => {
      assertRefused(await proxy('ldap1', '/request', { method: 'POST', headers: { authorization: ldap('einstein:password', 'invalidldap') } }));
      assertRefused(await proxy('ldap1', '/request', { headers: { authorization: ldap('einstein:') } }));
      assertRefused(await proxy('ldap1', '/request', { headers: { authorization: ldap('einstein:wrong_password') } }));
      assertRefused(await proxy('ldap1', '/request', { headers: { authorization: ldap(`einstein:${'e0d91f53c566'.repeat(14)}`) } }));
      assertRefused(await proxy('ldap1', '/request', { headers: { authorization: ldap('einstein:password:another_password') } }));
    });

    it('LD04 a realm is sent in WWW-Authenticate; a custom header_type is the challenge, with or without realm', async () => {
      assertRefused(await proxy('ldap2', '/request', { headers: { authorization: ldap('einstein:wrong_password') } }), 'LDAP realm="test-ldap"');
      assertRefused(await proxy('ldap5', '/get'), 'Basic');
      assertRefused(await proxy('ldap8', '/get'), 'Basic realm="test-ldap"');
      assertRefused(await proxy('ldap5', '/request', { method: 'POST', headers: { authorization: ldap('einstein:password', 'invalidldap') } }), 'Basic');
    });

    it('LD05 a username is one escaped DN value: `einstein,ou=scientists` under the suffix names no entry (unescaped, it would be einstein)', async () => {
      assertRefused(await proxy('suffix', '/request', { headers: { authorization: ldap('einstein,ou=scientists:password') } }));
    });
  });

  describe('authorized', () => {
    it('LD06 valid credentials in a POST and a GET, with leading space, any case of the scheme, or in Proxy-Authorization', async () => {
      echoed(await proxy('ldap1', '/request', { method: 'POST', body: 'a=1', headers: { authorization: ldap('einstein:password'), 'content-type': 'application/x-www-form-urlencoded' } }));
      echoed(await proxy('ldap1', '/request', { headers: { authorization: ` ${ldap('einstein:password')}` } }));
      echoed(await proxy('ldap1', '/request', { headers: { authorization: ldap('einstein:password', 'LDAP') } }));
      echoed(await proxy('ldap1', '/request', { headers: { 'proxy-authorization': ldap('einstein:password') } }));
      echoed(await proxy('ldap5', '/request', { method: 'POST', headers: { authorization: ldap('einstein:password', 'basic') } }));
    });

    it('LD07 the identity headers: the credential is the username, no consumer, not anonymous; client copies are dropped', async () => {
      const got = echoed(
        await proxy('ldap1', '/request', { headers: { authorization: ldap('einstein:password'), 'x-consumer-id': 'forged', 'x-anonymous-consumer': 'true' } }),
      );
      assert.equal(got['x-credential-identifier'], 'einstein');
      assert.equal(got['x-consumer-id'], undefined);
      assert.equal(got['x-consumer-username'], undefined);
      assert.equal(got['x-anonymous-consumer'], undefined);
    });

    it('LD08 hide_credentials false sends Authorization upstream; true keeps both headers back', async () => {
      assert.equal(echoed(await proxy('ldap1', '/request', { headers: { authorization: ldap('einstein:password') } })).authorization, ldap('einstein:password'));
      const hidden = echoed(await proxy('ldap2', '/request', { headers: { authorization: ldap('einstein:password'), 'proxy-authorization': 'ldap e30=' } }));
      assert.equal(hidden.authorization, undefined);
      assert.equal(hidden['proxy-authorization'], undefined);
    });

    it('LD09 StartTLS and LDAPS; verify_ldap_host refuses a certificate nobody vouches for (401, as Kong\'s failed handshake)', async () => {
      assert.equal(echoed(await proxy('starttls', '/request', { headers: { authorization: ldap('einstein:password') } }))['x-credential-identifier'], 'einstein');
      assert.equal(echoed(await proxy('ldaps', '/request', { headers: { authorization: ldap('einstein:password') } }))['x-credential-identifier'], 'einstein');
      assertRefused(await proxy('starttls', '/request', { headers: { authorization: ldap('einstein:wrong') } }));
      assertRefused(await proxy('verified', '/request', { headers: { authorization: ldap('einstein:password') } }));
    });

    it('LD10 gRPC: a call without credentials is UNAUTHENTICATED; with them it passes', async () => {
      await assert.rejects(unary(fx.grpcClient, { message: 'hello' }), (err: grpc.ServiceError) => err.code === 16);
      const { reply } = await unary(fx.grpcClient, { message: 'hello' }, { metadata: { authorization: ldap('einstein:password') } });
      assert.equal(reply.metadata['x-credential-identifier'], 'einstein');
    });
  });

  describe('anonymous', () => {
    it('LD11 right credentials with anonymous: the directory user', async () => {
      const got = echoed(await proxy('ldap3', '/request', { headers: { authorization: ldap('einstein:password') } }));
      assert.equal(got['x-credential-identifier'], 'einstein');
      assert.equal(got['x-anonymous-consumer'], undefined);
    });

    it('LD12 no credentials with anonymous by id or by username: the anonymous consumer', async () => {
      for (const host of ['ldap3', 'ldap7']) {
        const got = echoed(await proxy(host, '/request'));
        assert.equal(got['x-anonymous-consumer'], 'true');
        assert.equal(got['x-consumer-username'], 'no-body');
        assert.equal(got['x-credential-identifier'], undefined);
      }
    });

    it("LD13 an anonymous consumer that does not exist is a 500 with Kong's message", async () => {
      const reply = await proxy('ldap4', '/request');
      assert.equal(reply.status, 500);
      assert.equal(reply.json().message, `anonymous consumer ${MISSING_ANONYMOUS} is configured but doesn't exist`);
    });
  });

  describe('several authentication plugins', () => {
    it('LD14 logical AND (no anonymous): both credentials are needed; each plugin answers its own challenge', async () => {
      const both = echoed(await proxy('logical-and', '/request', { headers: { apikey: 'Mouse', authorization: ldap('einstein:password') } }));
      assert.equal(both['x-anonymous-consumer'], undefined);
      assertRefused(await proxy('logical-and', '/request', { headers: { apikey: 'Mouse' } }));
      const ldapOnly = await proxy('logical-and', '/request', { headers: { authorization: ldap('einstein:password') } });
      assert.equal(ldapOnly.status, 401);
      assert.match(String(ldapOnly.headers['www-authenticate']), /^Key/);
    });

    it('LD15 logical OR (anonymous on both): either credential, or the anonymous consumer', async () => {
      const both = echoed(await proxy('logical-or', '/request', { headers: { apikey: 'Mouse', authorization: ldap('einstein:password') } }));
      assert.equal(both['x-consumer-username'], 'Mickey');
      assert.equal(both['x-anonymous-consumer'], undefined);
      const ldapOnly = echoed(await proxy('logical-or', '/request', { headers: { authorization: ldap('einstein:password') } }));
      assert.equal(ldapOnly['x-credential-identifier'], 'einstein');
      assert.equal(ldapOnly['x-anonymous-consumer'], undefined);
      const none = echoed(await proxy('logical-or', '/request'));
      assert.equal(none['x-anonymous-consumer'], 'true');
      assert.equal(none['x-consumer-username'], 'Anonymous');
      assert.equal(none['x-credential-identifier'], undefined);
    });
  });

  describe('the verdict cache and a directory that fails', () => {
    it('LD16 a silent directory is a 500 after `timeout`, and other requests are served meanwhile', async () => {
      let settled = false;
      const slow = proxy('silent', '/request', { headers: { authorization: ldap('einstein:password') } }).finally(() => (settled = true));
      echoed(await proxy('ldap1', '/request', { headers: { authorization: ldap('bohr:atom') } }));
      assert.equal(settled, false, 'the silent directory answered before the other request');
      const reply = await slow;
      assert.equal(reply.status, 500);
      assert.equal(reply.json().message, "An unexpected error occurred");
    });

    it('LD17 a directory nobody listens on is a 500; an oversized credential is refused without asking it', async () => {
      const reply = await proxy('dead', '/request', { headers: { authorization: ldap('einstein:password') } });
      assert.equal(reply.status, 500);
      assertRefused(await proxy('dead', '/request', { headers: { authorization: ldap(`einstein:${'x'.repeat(4000)}`) } }));
    });

    it('LD18 accepted and refused binds are remembered for cache_ttl: the directory down, they still hold; new ones are 500', async () => {
      echoed(await proxy('cached', '/request', { headers: { authorization: ldap('newton:gravity') } }));
      assertRefused(await proxy('cached', '/request', { headers: { authorization: ldap('newton:apple') } }));
      await fx.slapd.pause();
      try {
        // Several requests: on a node of workers each process asks the others before the directory.
        for (let i = 0; i < 4; i++) {
          echoed(await proxy('cached', '/request', { headers: { authorization: ldap('newton:gravity') } }));
          assertRefused(await proxy('cached', '/request', { headers: { authorization: ldap('newton:apple') } }));
        }
        assert.equal((await proxy('cached', '/request', { headers: { authorization: ldap('newton:prism') } })).status, 500);
      } finally {
        await fx.slapd.start();
      }
    });

    it('LD19 a changed password: the old one holds until cache_ttl passes, then the new one is asked for', async () => {
      echoed(await proxy('short', '/request', { headers: { authorization: ldap('curie:radium') } }));
      await fx.slapd.setPassword('curie', 'polonium');
      await waitFor(async () => (await proxy('short', '/request', { headers: { authorization: ldap('curie:radium') } })).status === 401, 'the old password to expire');
      echoed(await proxy('short', '/request', { headers: { authorization: ldap('curie:polonium') } }));
    });
  });
});

describe('Kong ldap-auth: config schema (02-schema)', () => {
  const directory = { ldap_host: 'example.com', base_dn: 'dc=example,dc=com', attribute: 'cn' };

  it("LD20 ldaps and start_tls exclude each other, with Kong's message; the port defaults to 389", async () => {
    assert.deepEqual(await pluginConfigErrors('ldap-auth', { ...directory, ldaps: true, start_tls: true }), [
      "config: 'ldaps' and 'start_tls' cannot be enabled simultaneously",
    ]);
    assert.deepEqual(await pluginConfigErrors('ldap-auth', directory), []);
    assert.deepEqual(await pluginConfigErrors('ldap-auth', { ...directory, ldap_port: 12345 }), []);
    assert.deepEqual(await pluginConfigErrors('ldap-auth', { ldap_host: 'example.com' }), ['config.base_dn: required field missing', 'config.attribute: required field missing']);
  });

  it('LD21 the plugin cannot be scoped to a consumer (no_consumer)', async () => {
    const errors = await pluginConfigErrors('ldap-auth', directory, { consumer: 'someone' });
    assert.equal(errors.length, 1, errors.join('\n'));
  });
});
