/**
 * Kong's admin endpoints for certificates, SNIs and CA certificates (kong/api/routes/certificates.lua,
 * snis.lua) and the vaults their keys may be read from (named by their `prefix`, the endpoint key of
 * kong/db/schema/entities/vaults.lua). Private keys are never shown:
 * whoever can read the admin API cannot otherwise take the gateway's identity.
 */
import type { Certificate, GatewayConfig } from '../config/types.ts';
import type { AdminRoute } from '../pdk/types.ts';
import { page } from '../toolkit/paging.ts';
import { byIdOrName, dbLessWrite } from './routes.ts';

/** A certificate as the admin API shows it: without its private keys. */
export function withoutKeys<T extends Pick<Certificate, 'key' | 'key_alt'>>({ key: _key, key_alt: _keyAlt, ...rest }: T) {
  return rest;
}

export function certificateAdminRoutes(config: () => GatewayConfig): AdminRoute[] {
  const certificates = () => config().certificates.map(withoutKeys);
  const routes: AdminRoute[] = [
    { method: 'GET', path: '/certificates', handler: (req) => page(certificates(), req, '/certificates'), entity: 'certificates' },
    { method: 'GET', path: '/certificates/:id', handler: (req) => ({ status: 200, body: byIdOrName(certificates(), req.params.id, 'id') }) },
    {
      method: 'GET',
      path: '/certificates/:id/snis',
      handler: (req) => {
        const certificate = byIdOrName(certificates(), req.params.id, 'id');
        return page(config().snis.filter((s) => s.certificate.id === certificate.id), req, `/certificates/${req.params.id}/snis`);
      },
    },
    { method: 'GET', path: '/snis', handler: (req) => page(config().snis, req, '/snis'), entity: 'snis' },
    { method: 'GET', path: '/snis/:id', handler: (req) => ({ status: 200, body: byIdOrName(config().snis, req.params.id, 'name') }) },
    { method: 'GET', path: '/ca_certificates', handler: (req) => page(config().ca_certificates, req, '/ca_certificates'), entity: 'ca_certificates' },
    { method: 'GET', path: '/ca_certificates/:id', handler: (req) => ({ status: 200, body: byIdOrName(config().ca_certificates, req.params.id, 'id') }) },
    { method: 'GET', path: '/vaults', handler: (req) => page(config().vaults, req, '/vaults'), entity: 'vaults' },
    { method: 'GET', path: '/vaults/:id', handler: (req) => ({ status: 200, body: byIdOrName(config().vaults, req.params.id, 'prefix') }) },
  ];
  // Certificates, SNIs and CA certificates are written by entity-writes.ts; vaults come from gateway.yaml only.
  routes.push({ method: 'POST', path: '/vaults', handler: dbLessWrite('vaults', 'POST') });
  for (const method of ['PUT', 'PATCH', 'DELETE'] as const) routes.push({ method, path: '/vaults/:id', handler: dbLessWrite('vaults', method) });
  return routes;
}
