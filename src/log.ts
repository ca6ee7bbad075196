/** Structured logs (pino): JSON lines on stdout, one access-log line per request. */
import pino, { type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string): Logger {
  // Asynchronous writes keep logging off the request path; flushed on shutdown.
  return pino({ level, base: { pid: process.pid } }, pino.destination({ sync: false, minLength: 4096 }));
}
