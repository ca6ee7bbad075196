/**
 * hmac-auth's cost: requests signed over their Date and request line against the same route shape without
 * the plugin (the issue aims at ≥ 0.85), the same with a body and its Digest checked, and signatures that do
 * not match. The gateway runs as a child process; the signatures are made once (the Date stays within the
 * clock skew for the whole run).
 */
import { createHash, createHmac } from 'node:crypto';
import { bestOfAlternating, load, printTable, startChild, type LoadResult } from './lib.ts';
import { startTollgate } from './proxy.ts';

const SECRET = 'bench-hmac-secret';
const BODY = JSON.stringify({ order: 42, items: ['a', 'b', 'c'] });

function benchConfig(upstream: string): Record<string, any> {
  return {
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false },
    services: [
      { name: 'open', url: upstream, routes: [{ name: 'open', paths: ['/open'] }] },
      { name: 'signed', url: upstream, routes: [{ name: 'signed', paths: ['/signed'], plugins: [{ name: 'hmac-auth' }] }] },
      { name: 'digested', url: upstream, routes: [{ name: 'digested', paths: ['/digested'], plugins: [{ name: 'hmac-auth', config: { validate_request_body: true } }] }] },
    ],
    consumers: [{ username: 'bench', hmacauth_credentials: [{ username: 'bench-signer', secret: SECRET }] }],
  };
}

/** The headers of a request signed by the bench credential over `lines` (joined by newlines). */
function signed(names: string, lines: string[], secret = SECRET): Record<string, string> {
  const signature = createHmac('sha256', secret).update(lines.join('\n')).digest('base64');
  return { authorization: `hmac username="bench-signer", algorithm="hmac-sha256", headers="${names}", signature="${signature}"` };
}

export async function run(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts');
  const tollgate = await startTollgate(benchConfig(upstream.urls[0]), 2);
  const [proxy] = tollgate.urls;
  try {
    const date = new Date().toUTCString();
    const digest = `SHA-256=${createHash('sha256').update(BODY).digest('base64')}`;
    const get = { date, ...signed('date request-line', [`date: ${date}`, 'GET /signed/hello HTTP/1.1']) };
    const post = { date, digest, 'content-type': 'application/json', ...signed('date digest request-line', [`date: ${date}`, `digest: ${digest}`, 'POST /digested/hello HTTP/1.1']) };
    const wrong = { date, ...signed('date request-line', [`date: ${date}`, 'GET /signed/hello HTTP/1.1'], 'wrong-secret') };

    const pid = tollgate.process.pid;
    // The same headers to both: the ratio is the plugin's cost, not that of forwarding a longer request.
    const open = () => load({ url: `${proxy}/open/hello`, headers: get, pid });
    const hmac = () => load({ url: `${proxy}/signed/hello`, headers: get, pid });
    const [plain, withPlugin] = await bestOfAlternating([open, hmac]);
    const rows: [string, LoadResult][] = [
      ['same route shape, no plugin', plain],
      ['hmac-auth, GET signed over date and request-line', withPlugin],
      ['hmac-auth, POST with its Digest checked', await load({ url: `${proxy}/digested/hello`, method: 'POST', headers: post, body: BODY, pid })],
      ['hmac-auth, a signature that does not match (401)', await load({ url: `${proxy}/signed/hello`, headers: wrong, pid })],
    ];
    printTable('hmac-auth: 50 keep-alive connections, 5 s, best of 2 alternating rounds (ratio to the route without plugin; aim ≥ 0.85)', rows, rows[0][1]);
    console.log('(the 401 row counts as non-2xx by design: it measures how fast wrong signatures are refused.)');
  } finally {
    await Promise.all([upstream.stop(), tollgate.stop()]);
  }
}
