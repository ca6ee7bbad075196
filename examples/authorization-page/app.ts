/**
 * A small operator web app in front of Tollgate's oauth2 plugin: the browser side of the authorization-code
 * flow that Kong's plugin leaves to the operator.
 *
 *   client app ──302──▶ GET /authorize?response_type=code&client_id=…&redirect_uri=…&state=…&code_challenge=…
 *   user signs in (POST /login), sees the application and its developer (admin `GET /oauth2?client_id=`),
 *   approves (POST /consent) ──▶ back end POSTs <route>/oauth2/authorize with provision_key +
 *   authenticated_userid (+ PKCE params) ──▶ 303 to the returned redirect_uri (…?code=…&state=…).
 *
 * Sessions live in memory (a demo; use a shared store behind a load balancer). Users come from `USERS`.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { GatewayClient, type Application, type GatewaySettings } from './gateway-client.ts';
import { consentPage, errorPage, homePage, loginPage } from './views.ts';

export interface PageOptions extends GatewaySettings {
  /** username → password (demo accounts). */
  users: Map<string, string>;
  /** Mark the session cookie `Secure` (serve the page over HTTPS in production). */
  cookieSecure: boolean;
}

/** One authorization request waiting for the user's sign-in and consent. */
interface PendingRequest {
  clientId: string;
  redirectUri?: string;
  scope?: string;
  state?: string;
  codeChallenge?: string;
  codeChallengeMethod?: string;
}

interface Session {
  user?: string;
  csrf: string;
  pending: Map<string, PendingRequest>;
  expiresAt: number;
}

const COOKIE = 'tg_authpage';
const SESSION_TTL_MS = 30 * 60_000;
const MAX_SESSIONS = 10_000;
const MAX_PENDING_PER_SESSION = 20;
const MAX_BODY_BYTES = 16 * 1024;
const MAX_PARAM_LENGTH = 2048;
const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

class BadRequest extends Error {}

const randomId = () => randomBytes(24).toString('base64url');

function sameSecret(given: string, expected: string): boolean {
  const digest = (v: string) => createHash('sha256').update(v).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

export function createAuthorizationPage(options: PageOptions): http.Server {
  const gateway = new GatewayClient(options);
  const sessions = new Map<string, Session>();

  function sessionOf(req: IncomingMessage): [string, Session] | undefined {
    const sid = /(?:^|;\s*)tg_authpage=([\w-]+)/.exec(req.headers.cookie ?? '')?.[1];
    const session = sid ? sessions.get(sid) : undefined;
    if (!sid || !session) return undefined;
    if (session.expiresAt < Date.now()) {
      sessions.delete(sid);
      return undefined;
    }
    session.expiresAt = Date.now() + SESSION_TTL_MS;
    return [sid, session];
  }

  function startSession(res: ServerResponse, carried?: Session): Session {
    if (sessions.size >= MAX_SESSIONS) sessions.delete(sessions.keys().next().value!);
    const sid = randomId();
    const session: Session = carried ?? { csrf: randomId(), pending: new Map(), expiresAt: 0 };
    session.expiresAt = Date.now() + SESSION_TTL_MS;
    sessions.set(sid, session);
    const secure = options.cookieSecure ? '; Secure' : '';
    res.setHeader('set-cookie', `${COOKIE}=${sid}; HttpOnly; SameSite=Lax; Path=/${secure}`);
    return session;
  }

  function send(res: ServerResponse, status: number, html: string): void {
    res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': 'text/html; charset=utf-8' }).end(html);
  }

  function redirect(res: ServerResponse, location: string): void {
    res.writeHead(303, { ...SECURITY_HEADERS, location }).end();
  }

  /** The request's application, with its redirect_uri checked: we never redirect to an unregistered URI. */
  async function checkedApplication(pending: PendingRequest): Promise<Application> {
    const app = await gateway.findApplication(pending.clientId);
    if (!app) throw new BadRequest('This application is not registered.');
    if (app.redirectUris.length === 0) throw new BadRequest('This application has no redirect URI registered.');
    if (pending.redirectUri && !app.redirectUris.includes(pending.redirectUri)) {
      throw new BadRequest('The redirect_uri is not registered for this application.');
    }
    return app;
  }

  function errorRedirect(app: Application, pending: PendingRequest, error: string, description: string): string {
    const target = new URL(pending.redirectUri ?? app.redirectUris[0]);
    target.searchParams.set('error', error);
    target.searchParams.set('error_description', description);
    if (pending.state) target.searchParams.set('state', pending.state);
    return target.href;
  }

  async function authorizeEntry(req: IncomingMessage, res: ServerResponse, query: URLSearchParams): Promise<void> {
    const param = (name: string) => {
      const value = query.get(name) ?? undefined;
      if (value && value.length > MAX_PARAM_LENGTH) throw new BadRequest(`The ${name} parameter is too long.`);
      return value || undefined;
    };
    const clientId = param('client_id');
    if (!clientId) throw new BadRequest('The client_id parameter is missing.');
    const pending: PendingRequest = {
      clientId,
      redirectUri: param('redirect_uri'),
      scope: param('scope'),
      state: param('state'),
      codeChallenge: param('code_challenge'),
      codeChallengeMethod: param('code_challenge_method'),
    };
    const app = await checkedApplication(pending);
    if (param('response_type') !== 'code') {
      return redirect(res, errorRedirect(app, pending, 'unsupported_response_type', 'Only response_type=code is supported'));
    }
    const session = sessionOf(req)?.[1] ?? startSession(res);
    if (session.pending.size >= MAX_PENDING_PER_SESSION) session.pending.delete(session.pending.keys().next().value!);
    const requestId = randomId();
    session.pending.set(requestId, pending);
    if (session.user) return redirect(res, `/consent?request=${requestId}`);
    send(res, 200, loginPage(requestId, session.csrf));
  }

  /** The session and pending request a form post refers to, after the CSRF check. */
  function formContext(req: IncomingMessage, form: URLSearchParams): { sid: string; session: Session; requestId: string; pending: PendingRequest } {
    const found = sessionOf(req);
    if (!found) throw new BadRequest('Your session has expired. Start again from the application.');
    const [sid, session] = found;
    if (!sameSecret(form.get('csrf') ?? '', session.csrf)) throw new BadRequest('The form has expired. Start again from the application.');
    const requestId = form.get('request') ?? '';
    const pending = session.pending.get(requestId);
    if (!pending) throw new BadRequest('This authorization request has expired. Start again from the application.');
    return { sid, session, requestId, pending };
  }

  async function login(req: IncomingMessage, res: ServerResponse, form: URLSearchParams): Promise<void> {
    const { sid, session, requestId } = formContext(req, form);
    const username = form.get('username') ?? '';
    const expected = options.users.get(username);
    // Compare against something even for unknown users, so timing does not tell which usernames exist.
    const ok = sameSecret(form.get('password') ?? '', expected ?? randomId()) && expected !== undefined;
    if (!ok) return send(res, 401, loginPage(requestId, session.csrf, 'Wrong username or password.'));
    // A new session id after sign-in (no session fixation); the pending requests come along.
    sessions.delete(sid);
    session.user = username;
    session.csrf = randomId();
    startSession(res, session);
    redirect(res, `/consent?request=${requestId}`);
  }

  async function consentForm(req: IncomingMessage, res: ServerResponse, query: URLSearchParams): Promise<void> {
    const session = sessionOf(req)?.[1];
    const requestId = query.get('request') ?? '';
    const pending = session?.pending.get(requestId);
    if (!session?.user || !pending) throw new BadRequest('This authorization request has expired. Start again from the application.');
    const app = await checkedApplication(pending);
    const scopes = (pending.scope ?? '').split(/\s+/).filter(Boolean);
    send(res, 200, consentPage(app, session.user, scopes, requestId, session.csrf));
  }

  async function decide(req: IncomingMessage, res: ServerResponse, form: URLSearchParams): Promise<void> {
    const { session, requestId, pending } = formContext(req, form);
    if (!session.user) throw new BadRequest('Sign in first.');
    session.pending.delete(requestId);
    const app = await checkedApplication(pending);
    if (form.get('decision') !== 'approve') {
      return redirect(res, errorRedirect(app, pending, 'access_denied', 'The user denied the request'));
    }
    const outcome = await gateway.authorize({ ...pending, userId: session.user });
    if (outcome.kind === 'redirect') return redirect(res, outcome.location);
    send(res, 502, errorPage('Authorization failed', `${outcome.error}: ${outcome.description}`));
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://page.invalid');
    const key = `${req.method} ${url.pathname}`;
    switch (key) {
      case 'GET /':
        return send(res, 200, homePage());
      case 'GET /authorize':
        return authorizeEntry(req, res, url.searchParams);
      case 'GET /consent':
        return consentForm(req, res, url.searchParams);
      case 'POST /login':
        return login(req, res, await readForm(req));
      case 'POST /consent':
        return decide(req, res, await readForm(req));
      default:
        return send(res, 404, errorPage('Not found', 'There is nothing here.'));
    }
  }

  return http.createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      if (res.headersSent) return void res.destroy();
      if (err instanceof BadRequest) return send(res, 400, errorPage('Cannot continue', err.message));
      console.error('authorization page:', err);
      send(res, 502, errorPage('Gateway unavailable', 'The gateway could not be reached. Try again later.'));
    });
  });
}

async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  if (!String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) {
    throw new BadRequest('Expected a form submission.');
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new BadRequest('The form is too large.');
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}
