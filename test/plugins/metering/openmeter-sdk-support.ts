/**
 * The official `@openmeter/sdk`, unmodified, pointed at a test gateway's metering route: its base URL is
 * the route's, its API key a gateway token, and its fetch one that trusts the gateway's self-signed
 * certificate (the SDK takes any fetch).
 */
import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import { HTTPError, OpenMeter } from '@openmeter/sdk';
import { OpenMeter as OpenMeterPortal } from '@openmeter/sdk/portal';
import { Agent, fetch as undiciFetch } from 'undici';
import type { TestGateway } from '../../helpers/gateway.ts';
import { startBillingGateway, type BillingApi } from './billing/support.ts';
import { ROUTE_PATH } from './catalogue-support.ts';

const insecure = new Agent({ connect: { rejectUnauthorized: false } });

async function fetchInsecure(input: Request): Promise<Response> {
  const body = input.body ? Buffer.from(await input.arrayBuffer()) : undefined;
  return (await undiciFetch(input.url, { method: input.method, headers: input.headers as any, body, dispatcher: insecure })) as unknown as Response;
}

export function sdkClient(httpsBase: string, token: string): OpenMeter {
  return new OpenMeter({ baseUrl: `${httpsBase}${ROUTE_PATH}`, apiKey: token, fetch: fetchInsecure as any });
}

/** The SDK's consumer portal client: `baseUrl` the portal route's URL, authenticated by a portal token. */
export function portalClient(baseUrl: string, portalToken: string): OpenMeterPortal {
  return new OpenMeterPortal({ baseUrl, portalToken, fetch: fetchInsecure as any });
}

export async function closeSdkClients(): Promise<void> {
  await insecure.close();
}

/** The HTTPError an SDK call fails with, checked to carry `status`. */
export async function sdkError(call: Promise<unknown>, status: number): Promise<HTTPError> {
  const err = await call.then(
    (value) => assert.fail(`expected HTTP ${status}, got ${JSON.stringify(value)}`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof HTTPError, String(err));
  assert.equal(err.status, status, err.message);
  return err;
}

/** A file's billing gateway, its v3 API and an SDK client on it: started before the file's tests, stopped after them. */
export function billingSdkSuite(): { gw: TestGateway; v3: BillingApi; client: OpenMeter } {
  const suite = {} as { gw: TestGateway; v3: BillingApi; client: OpenMeter };
  before(async () => {
    const { gateway, api } = await startBillingGateway();
    Object.assign(suite, { gw: gateway, v3: api, client: sdkClient(gateway.https, api.token) });
  });
  after(async () => {
    await suite.gw?.stop();
    await closeSdkClients();
  });
  return suite;
}
