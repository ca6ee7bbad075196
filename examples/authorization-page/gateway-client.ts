/**
 * The two calls an authorization page makes to Tollgate: the admin lookup of the application
 * (`GET <admin>/oauth2?client_id=`) and the back-channel `POST <route>/oauth2/authorize` with the
 * provision key and the signed-in user's id, which answers `{ redirect_uri }`.
 */
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';

export interface GatewaySettings {
  /** Base URL of the route carrying the oauth2 plugin, e.g. `https://127.0.0.1:8443/api`. */
  gatewayUrl: string;
  /** Host header for host-matched routes (default: the URL's host). */
  gatewayHost?: string;
  /** The admin API, e.g. `http://127.0.0.1:8001`. */
  adminUrl: string;
  provisionKey: string;
  /** PEM certificate(s) to trust for the gateway's TLS (its self-signed one lives in `<data_dir>/tls`). */
  gatewayCa?: string;
  /** Development only: accept any gateway certificate. */
  insecureTls?: boolean;
}

export interface Application {
  clientId: string;
  /** The credential's `name`: what the user is asked to trust. */
  name: string;
  /** The consumer's username (or custom_id): who built the application. */
  developer: string;
  redirectUris: string[];
}

/** What the user agreed to; PKCE parameters are passed through untouched. */
export interface AuthorizationGrant {
  clientId: string;
  userId: string;
  redirectUri?: string;
  scope?: string;
  state?: string;
  codeChallenge?: string;
  codeChallengeMethod?: string;
}

export type AuthorizeOutcome =
  /** Send the browser there (a code, or an OAuth error the client must see). */
  | { kind: 'redirect'; location: string }
  /** The gateway refused without a redirect target (e.g. a wrong provision key): show an error page. */
  | { kind: 'failed'; status: number; error: string; description: string };

interface RawReply {
  status: number;
  body: string;
}

const TIMEOUT_MS = 10_000;
const MAX_REPLY_BYTES = 64 * 1024;

export class GatewayClient {
  constructor(private readonly settings: GatewaySettings) {}

  /** The application behind a client_id, or null when there is none. */
  async findApplication(clientId: string): Promise<Application | null> {
    const url = new URL('/oauth2', this.settings.adminUrl);
    url.searchParams.set('client_id', clientId);
    const reply = await this.send(url, 'GET');
    if (reply.status !== 200) throw new Error(`admin API answered ${reply.status} for the application lookup`);
    const [credential] = (JSON.parse(reply.body).data ?? []) as any[];
    if (!credential || credential.client_id !== clientId) return null;
    return {
      clientId,
      name: String(credential.name),
      developer: String(credential.consumer?.username ?? credential.consumer?.custom_id ?? 'an unknown developer'),
      redirectUris: Array.isArray(credential.redirect_uris) ? credential.redirect_uris.map(String) : [],
    };
  }

  async authorize(grant: AuthorizationGrant): Promise<AuthorizeOutcome> {
    const form = new URLSearchParams({
      provision_key: this.settings.provisionKey,
      authenticated_userid: grant.userId,
      client_id: grant.clientId,
      response_type: 'code',
    });
    const optional: [string, string | undefined][] = [
      ['redirect_uri', grant.redirectUri],
      ['scope', grant.scope],
      ['state', grant.state],
      ['code_challenge', grant.codeChallenge],
      ['code_challenge_method', grant.codeChallengeMethod],
    ];
    for (const [name, value] of optional) if (value) form.set(name, value);

    const url = new URL(this.settings.gatewayUrl.replace(/\/+$/, '') + '/oauth2/authorize');
    const reply = await this.send(url, 'POST', form.toString(), this.settings.gatewayHost);
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(reply.body);
    } catch {
      return { kind: 'failed', status: reply.status, error: 'bad_gateway', description: 'The gateway gave an unreadable answer.' };
    }
    if ((reply.status === 200 || reply.status === 400) && typeof body.redirect_uri === 'string') {
      return { kind: 'redirect', location: body.redirect_uri };
    }
    return {
      kind: 'failed',
      status: reply.status,
      error: String(body.error ?? 'server_error'),
      description: String(body.error_description ?? body.message ?? 'The gateway refused the authorization.'),
    };
  }

  private send(url: URL, method: 'GET' | 'POST', body?: string, host?: string): Promise<RawReply> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    if (host) headers.host = host;
    const tls = url.protocol === 'https:';
    const options: https.RequestOptions = { method, headers, timeout: TIMEOUT_MS };
    if (tls) {
      if (this.settings.gatewayCa) options.ca = this.settings.gatewayCa;
      if (this.settings.insecureTls) options.rejectUnauthorized = false;
      const sniName = host?.replace(/:\d+$/, '');
      if (sniName && !isIP(sniName)) options.servername = sniName;
    }
    return new Promise((resolve, reject) => {
      const req = (tls ? https : http).request(url, options, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_REPLY_BYTES) req.destroy(new Error(`${url.origin} answered more than ${MAX_REPLY_BYTES} bytes`));
          else chunks.push(chunk);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error(`${url.origin} did not answer within ${TIMEOUT_MS} ms`)));
      req.on('error', reject);
      req.end(body);
    });
  }
}
