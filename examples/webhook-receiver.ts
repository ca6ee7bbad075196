/**
 * An example receiver of notification webhooks for docs/notifications.md: checks each delivery's
 * Standard Webhooks signature (`webhook-id`, `webhook-timestamp`, `webhook-signature`, HMAC-SHA256 with
 * the channel's `whsec_` secret) and its timestamp, refuses what fails (401), dedupes by `webhook-id`,
 * and shows what it got on a GET.
 *   WEBHOOK_SECRET=whsec_... npm run example:webhook-receiver      (127.0.0.1:3004, or PORT)
 * SIGTERM or SIGINT closes it and exits 0.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';

/** How far a delivery's timestamp may be from this clock (Standard Webhooks' advice: 5 minutes). */
const TOLERANCE_SECONDS = 300;
const MAX_BODY = 1024 * 1024;

/** Whether `body` was signed with `secret` under these headers, recently. */
export function verifyWebhook(secret: string, headers: IncomingHttpHeaders, body: string, now = Date.now()): boolean {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string') return false;
  if (!/^\d+$/.test(timestamp) || Math.abs(now / 1000 - Number(timestamp)) > TOLERANCE_SECONDS) return false;
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest();
  // The header may carry several space-separated signatures (a secret being rotated): one must match.
  return signatures.split(' ').some((entry) => {
    const [version, signature] = entry.split(',');
    const given = Buffer.from(signature ?? '', 'base64');
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

export interface Delivery {
  id: string;
  type: string;
  payload: Record<string, any>;
}

/** A receiver: every verified delivery (duplicates included), and how many were refused. */
export class WebhookReceiver {
  readonly deliveries: Delivery[] = [];
  refused = 0;

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(secret: string, port = 0): Promise<WebhookReceiver> {
    let receiver: WebhookReceiver | undefined;
    const server = http.createServer((req, res) => receiver!.handle(secret, req, res));
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
    receiver = new WebhookReceiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`);
    return receiver;
  }

  /** The distinct deliveries, by webhook id (what a receiver that dedupes acts on). */
  distinct(): Delivery[] {
    return [...new Map(this.deliveries.map((d) => [d.id, d])).values()];
  }

  private handle(secret: string, req: http.IncomingMessage, res: http.ServerResponse): void {
    if (req.method === 'GET') {
      const body = JSON.stringify({ distinct: this.distinct(), received: this.deliveries.length, refused: this.refused });
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY) chunks.push(chunk);
    });
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      if (size > MAX_BODY || !verifyWebhook(secret, req.headers, body)) {
        this.refused++;
        return void res.writeHead(401).end('invalid signature');
      }
      const payload = JSON.parse(body) as Record<string, any>;
      this.deliveries.push({ id: req.headers['webhook-id'] as string, type: payload.type, payload });
      res.writeHead(204).end();
    });
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

async function main(): Promise<void> {
  const secret = process.env.WEBHOOK_SECRET;
  if (!secret) throw new Error('set WEBHOOK_SECRET to the channel\'s signingSecret');
  const receiver = await WebhookReceiver.start(secret, Number(process.env.PORT ?? 3004));
  console.log(`webhook receiver listening on ${receiver.url}`);
  const stop = () => void receiver.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
