/**
 * express-gateway, proxy only (one pipeline: its proxy policy, node-http-proxy with a keep-alive agent):
 * every path to `argv[2]`. Its configuration is two YAML files in a directory (JSON is YAML); its store
 * is the in-memory Redis emulation (with its own user, application and credential models, which it
 * reads from the same directory), its admin API off, its log at warn.
 */
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-express-gateway-'));
const gatewayConfig = {
  http: { port: 0, hostname: '127.0.0.1' },
  apiEndpoints: { api: { host: '*' } },
  serviceEndpoints: { upstream: { url: process.argv[2] } },
  policies: ['proxy'],
  pipelines: { default: { apiEndpoints: ['api'], policies: [{ proxy: [{ action: { serviceEndpoint: 'upstream' } }] }] } },
};
const systemConfig = {
  db: { redis: { emulate: true, namespace: 'EG' } },
  crypto: { cipherKey: 'bench', algorithm: 'aes256', saltRounds: 10 },
  session: { secret: 'bench', resave: false, saveUninitialized: false },
  accessTokens: { timeToExpiry: 7200000 },
  refreshTokens: { timeToExpiry: 7200000 },
  authorizationCodes: { timeToExpiry: 300000 },
};
writeFileSync(join(dir, 'gateway.config.yml'), JSON.stringify(gatewayConfig));
writeFileSync(join(dir, 'system.config.yml'), JSON.stringify(systemConfig));
cpSync(join(dirname(createRequire(import.meta.url).resolve('express-gateway')), 'config', 'models'), join(dir, 'models'), { recursive: true });
process.env.LOG_LEVEL = 'warn';

const { default: expressGateway } = await import('express-gateway');
const [{ app }] = await expressGateway().load(dir).run();
console.log(`listening on http://127.0.0.1:${app.address().port}`);
