/** Kong's redirect config (kong/plugins/redirect/schema.lua, Kong 3.9). */
import { headerValueProblem, type Infer, type RecordSchema } from '../../src/pdk/index.ts';

const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;
const AUTHORITY = /^\/\/([^/?#]*)/;

/**
 * Kong's `typedefs.url` (a host and a scheme, with its messages), and what Tollgate needs besides: a URL
 * the WHATWG parser takes (keep_incoming_path rewrites it) and a value a Location header can carry.
 */
function locationProblem(location: string): string | undefined {
  const scheme = SCHEME.exec(location)?.[0];
  const authority = AUTHORITY.exec(scheme ? location.slice(scheme.length) : location)?.[1];
  if (!authority || !authority.replace(/^.*@/, '').replace(/:\d*$/, '')) return 'missing host in url';
  if (!scheme) return 'missing scheme in url';
  if (!URL.canParse(location)) return 'could not parse url';
  return headerValueProblem(location);
}

export const configSchema = {
  type: 'record',
  fields: {
    // A final status Node can send (Kong's schema allows 100–599).
    status_code: { type: 'integer', required: true, default: 301, between: [200, 599] },
    location: { type: 'string', required: true, custom: locationProblem },
    keep_incoming_path: { type: 'boolean', default: false },
  },
} as const satisfies RecordSchema;

export type RedirectConfig = Infer<typeof configSchema>;
