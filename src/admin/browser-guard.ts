/**
 * The admin API serves operators' tools (curl, SDKs, CI), never web pages. A page a browser shows could
 * otherwise make it send requests here (CSRF: a cross-origin `text/plain` or form POST needs no CORS
 * preflight), or re-point its own name at 127.0.0.1 and read the answers too (DNS rebinding). Browsers
 * say where a request comes from (Origin, Sec-Fetch-Site) and which name they resolved (Host).
 */
import type { IncomingMessage } from 'node:http';
import { AddressRanges } from '../address-ranges.ts';
import { parseRequestHost } from '../config/hostnames.ts';
import { HttpError } from '../pipeline/http-error.ts';

export interface AdminListenerFacts {
  scheme: 'http' | 'https';
  /** Bound to a loopback address: only loopback names can be meant. */
  loopback: boolean;
}

const CROSS_ORIGIN = 'cross-origin requests to the admin API are refused: it is not for web pages';
const NOT_LOOPBACK = 'the admin API listens on loopback and answers only to a loopback Host (localhost, 127.0.0.1, [::1])';

const LOOPBACK = new AddressRanges(['127.0.0.0/8', '::1']);

/** 127.0.0.0/8, ::1, or `localhost` and its subdomains (RFC 6761 §6.3; browsers resolve these themselves). */
export function isLoopbackName(name: string): boolean {
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  return LOOPBACK.has(name.startsWith('[') ? name.slice(1, -1) : name);
}

/** The error a browser-made request gets, or undefined for a tool's request. */
export function browserRefusal(req: IncomingMessage, listener: AdminListenerFacts): HttpError | undefined {
  const host = parseRequestHost(req.headers.host ?? '');
  const origin = req.headers.origin;
  if (origin !== undefined && (host === null || !isOwnOrigin(origin, host, listener.scheme))) return new HttpError(403, CROSS_ORIGIN);
  const site = req.headers['sec-fetch-site'];
  // `none`: typed in the address bar; `same-site` is still another origin (another port, another subdomain).
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return new HttpError(403, CROSS_ORIGIN);
  // Browsers always send Host; a tool speaking HTTP/1.0 may not.
  if (listener.loopback && host !== null && host.name !== '' && !isLoopbackName(host.name)) return new HttpError(403, NOT_LOOPBACK);
  if (host === null) return new HttpError(400, 'Bad Request: invalid Host header');
  return undefined;
}

/** Origin is `scheme://host[:port]` (RFC 6454); `null` (sandboxed pages, file:) is nobody's. */
function isOwnOrigin(origin: string, host: { name: string; port: number }, scheme: string): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  const defaultPort = scheme === 'https' ? 443 : 80;
  const originPort = url.port === '' ? defaultPort : Number(url.port);
  const hostPort = host.port === -1 ? defaultPort : host.port;
  return url.protocol === `${scheme}:` && parseRequestHost(url.host)?.name === host.name && originPort === hostPort;
}
