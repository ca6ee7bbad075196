/** The session's cookies: read from the request's Cookie header, written as lua-resty-session 4 writes them. */
import type { SessionConfig } from './schema.ts';

/** A cookie's value in `header` (the first of that name), or undefined. */
export function cookieValue(header: string | string[] | undefined, name: string): string | undefined {
  const headers = Array.isArray(header) ? header : header === undefined ? [] : [header];
  for (const line of headers) {
    for (const pair of line.split(';')) {
      const eq = pair.indexOf('=');
      if (eq > 0 && pair.slice(0, eq).trim() === name) return pair.slice(eq + 1).trim();
    }
  }
  return undefined;
}

/**
 * `name=value; Path=…; Domain=…; SameSite=…; Secure; HttpOnly`, and for a persistent cookie `; Expires=…;
 * Max-Age=…` (the order of Kong's spec). `Default` same-site sends no SameSite attribute.
 */
export function setCookie(config: SessionConfig, name: string, value: string, maxAgeSeconds?: number): string {
  const parts = [`${name}=${value}`, `Path=${config.cookie_path}`];
  if (config.cookie_domain) parts.push(`Domain=${config.cookie_domain}`);
  if (config.cookie_same_site !== 'Default') parts.push(`SameSite=${config.cookie_same_site}`);
  if (config.cookie_secure) parts.push('Secure');
  if (config.cookie_http_only) parts.push('HttpOnly');
  if (maxAgeSeconds !== undefined) {
    const seconds = Math.max(0, Math.ceil(maxAgeSeconds));
    parts.push(`Expires=${new Date(seconds === 0 ? 1000 : Date.now() + seconds * 1000).toUTCString()}`, `Max-Age=${seconds}`);
  }
  return parts.join('; ');
}

/** The Set-Cookie that makes a browser forget `name`. */
export function clearCookie(config: SessionConfig, name: string): string {
  return setCookie(config, name, '', 0);
}
