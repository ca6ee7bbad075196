/**
 * Host names and addresses: the one place they are split from their port and put in the form they are
 * compared in (request Host, `:authority`, absolute-form authority, SNI, route `hosts` and `snis`), and
 * the config's checks as Kong's `normalize_ip` does them (kong/tools/ip.lua): an IPv4 or IPv6 address,
 * or a name of letters, digits, `-`, `.` and `_`, each with an optional port. The validators return
 * Kong's message for each field (service `host`, route `hosts`, route `snis`).
 */
import { isIP } from 'node:net';

export interface HostAddress {
  type: 'ipv4' | 'ipv6' | 'name';
  /** -1 when no port was given. */
  port: number;
}

const IPV4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)(?::(\d+))?$/;
const BRACKETED_IPV6 = /^\[([^\]]*)\](?::(\d*))?$/;
const NAME_CHARS = /^[A-Za-z0-9\-._]+$/;
const MAX_PORT = 65535;
/**
 * What a request's host may be (RFC 3986 §3.2.2 reg-name or IP-literal, then an optional port): anything
 * else (`/`, `@` userinfo, spaces, controls) is not a host, and nginx answers 400 to it as Kong's front.
 */
const REQUEST_HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(?::\d*)?$/;

export interface HostAndPort {
  name: string;
  /** -1 when absent (or empty), NaN when not digits. */
  port: number;
}

/** Splits `name[:port]`, an IPv6 address in brackets. */
export function splitHostPort(host: string): HostAndPort {
  const colon = host.lastIndexOf(':');
  if (colon === -1 || (host.startsWith('[') && host.lastIndexOf(']') > colon)) return { name: host, port: -1 };
  const portText = host.slice(colon + 1);
  const port = portText === '' ? -1 : /^\d+$/.test(portText) ? Number(portText) : NaN;
  return { name: host.slice(0, colon), port };
}

/**
 * The form names are compared in: lowercase (DNS names are case-insensitive, RFC 4343), and without the
 * trailing dot of a fully qualified name: `secure.example.` is `secure.example`, as DNS resolves it and
 * nginx's `$host` and TLS SNI (RFC 6066 §3) carry it.
 */
export function canonicalName(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/**
 * A request's Host (or `:authority`, or absolute-form authority) split and in canonical form, or null when
 * it is not a host: characters a host cannot have, an empty label (`a..b`), a non-numeric port (nginx's
 * `ngx_http_validate_host` refuses the same). '' (no Host, HTTP/1.0) is no name and no port.
 */
export function parseRequestHost(raw: string): HostAndPort | null {
  if (raw === '') return { name: '', port: -1 };
  if (!REQUEST_HOST.test(raw) || raw.includes('..')) return null;
  const { name, port } = splitHostPort(raw);
  const canonical = canonicalName(name);
  return canonical === '' ? null : { name: canonical, port };
}

/** Kong's `hostname_type`: two colons or more is IPv6, digits and dots (port aside) IPv4, anything else a name. */
function addressType(address: string): HostAddress['type'] {
  const colons = address.split(':').length - 1;
  if (colons > 1) return 'ipv6';
  return /^[\d.]+$/.test(address.replace(':', '')) ? 'ipv4' : 'name';
}

/** The address and its port, or Kong's error: `invalid port number`, `invalid hostname: …`, `invalid ipv4/ipv6 address: …`. */
export function parseHostAddress(address: string): HostAddress | string {
  const type = addressType(address);
  if (type === 'ipv4') return parseIpv4(address);
  if (type === 'ipv6') return parseIpv6(address);
  return parseName(address);
}

function portOf(text: string | undefined): number | string {
  if (text === undefined) return -1;
  const port = Number(text);
  return port > MAX_PORT ? 'invalid port number' : port;
}

function parseIpv4(address: string): HostAddress | string {
  const found = IPV4.exec(address);
  if (!found || found.slice(1, 5).some((octet) => Number(octet) > 255)) return `invalid ipv4 address: ${address}`;
  const port = portOf(found[5]);
  return typeof port === 'string' ? port : { type: 'ipv4', port };
}

function parseIpv6(address: string): HostAddress | string {
  const bracketed = BRACKETED_IPV6.exec(address);
  const bare = bracketed ? bracketed[1] : address;
  if (bracketed && bracketed[2] === '') return 'invalid ipv6 address';
  if (!isIpv6(bare)) return `invalid ipv6 address: ${address}`;
  const port = portOf(bracketed?.[2]);
  return typeof port === 'string' ? port : { type: 'ipv6', port };
}

function isIpv6(text: string): boolean {
  const halves = text.split('::');
  if (halves.length > 2) return false;
  const groups = halves.flatMap((half) => (half === '' ? [] : half.split(':')));
  if (!groups.every((group) => /^[0-9A-Fa-f]{1,4}$/.test(group))) return false;
  return halves.length === 2 ? groups.length < 8 : groups.length === 8;
}

/** A name: no label may be empty or end with `-` (a leading `-` is fine: punycode). */
function parseName(address: string): HostAddress | string {
  const portText = /:(\d+)$/.exec(address)?.[1];
  const name = portText === undefined ? address : address.slice(0, -(portText.length + 1));
  const port = portOf(portText);
  if (typeof port === 'string') return port;
  const labelsValid = name.split('.').every((label) => label !== '' && !label.endsWith('-'));
  if (!NAME_CHARS.test(name) || !labelsValid) return `invalid hostname: ${address}`;
  return { type: 'name', port };
}

/** A service `host`: a name or an address, without a port. */
export function validateServiceHost(host: string): string | undefined {
  const parsed = parseHostAddress(host);
  if (parsed === 'invalid port number') return 'must not have a port';
  if (typeof parsed === 'string') return `invalid value: ${host}`;
  return parsed.port === -1 ? undefined : 'must not have a port';
}

/** A route `snis` entry: a name (one `*` as its first or last character allowed), never an address, never a port. */
export function validateSni(sni: string): string | undefined {
  const wildcards = sni.split('*').length - 1;
  if (wildcards > 1) return 'only one wildcard must be specified';
  if (wildcards === 1 && !sni.startsWith('*') && !sni.endsWith('*')) return 'wildcard must be leftmost or rightmost character';
  const parsed = parseHostAddress(sni.replace('*', 'wildcard'));
  if (parsed === 'invalid port number') return 'must not have a port';
  if (typeof parsed === 'string') return `invalid value: ${sni}`;
  if (parsed.type !== 'name') return 'must not be an IP';
  return parsed.port === -1 ? undefined : 'must not have a port';
}

/** An IPv4/IPv6 address, optionally with a prefix length its family allows. */
export function isCidr(text: string): boolean {
  const [address, bits, extra] = text.split('/');
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return false;
  return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128));
}
