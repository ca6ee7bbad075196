/** Builders for router tests: complete Route / Service entities with Kong's defaults. */
import type { Route, Service } from '../../../src/config/types.ts';
import type { RouteRequest } from '../../../src/router/index.ts';

let sequence = 0;

/** A uuid-shaped id; `n` fixes the order between ids (higher n = higher id = wins ties). */
export function uuid(n: number): string {
  return `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`;
}

export function service(overrides: Partial<Service> = {}): Service {
  return {
    id: uuid(0xa00000 + ++sequence),
    name: null,
    protocol: 'http',
    host: 'upstream.test',
    port: 80,
    path: null,
    retries: 5,
    connect_timeout: 60000,
    write_timeout: 60000,
    read_timeout: 60000,
    tls_verify: null,
    tls_verify_depth: null,
    ca_certificates: null,
    client_certificate: null,
    enabled: true,
    tags: null,
    created_at: 0,
    updated_at: 0,
    ...overrides,
  };
}

export function route(overrides: Partial<Route> = {}): Route {
  return {
    id: uuid(++sequence),
    name: null,
    protocols: ['http', 'https'],
    methods: null,
    hosts: null,
    paths: null,
    headers: null,
    snis: null,
    strip_path: true,
    preserve_host: false,
    regex_priority: 0,
    path_handling: 'v0',
    https_redirect_status_code: 426,
    request_buffering: true,
    response_buffering: true,
    service: null,
    tags: null,
    created_at: sequence,
    updated_at: sequence,
    ...overrides,
  };
}

export function request(overrides: Partial<RouteRequest> = {}): RouteRequest {
  return { method: 'GET', path: '/', host: 'example.com', port: 8000, headers: {}, scheme: 'http', ...overrides };
}
