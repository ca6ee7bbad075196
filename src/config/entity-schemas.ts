/** The core entities' schemas by Kong's entity name: what gateway.yaml is read with and `/schemas/{entity}` shows. */
import { validateRouteHeaderValue, validateRouteHost, validateRoutePath } from '../router/index.ts';
import { caCertificateSchema, certificateSchema, sniSchema } from './certificates.ts';
import { consumerSchema, pluginEntitySchema, routeSchema, serviceSchema } from './entities.ts';
import type { RecordSchema } from './schema.ts';
import { targetSchema, upstreamSchema } from './upstreams.ts';
import { vaultSchema } from './vaults.ts';

export const CORE_ENTITY_SCHEMAS: Readonly<Record<string, RecordSchema>> = {
  services: serviceSchema,
  routes: routeSchema(validateRoutePath, validateRouteHost, validateRouteHeaderValue),
  consumers: consumerSchema,
  plugins: pluginEntitySchema,
  upstreams: upstreamSchema,
  targets: targetSchema,
  certificates: certificateSchema,
  snis: sniSchema,
  ca_certificates: caCertificateSchema,
  vaults: vaultSchema,
};
