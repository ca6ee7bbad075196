/** The messages between a node's primary and its workers (cluster.ts), and what both ends must agree on. */
import type { Admission, QuotaRequest, QuotaReservation } from './exchange.ts';

/** The worker's end of the store's socket pair (after stdin, stdout, stderr and the cluster's IPC channel). */
export const STORE_FD = 4;

/** How long the primary waits for the workers' values of a gathered topic; a worker that has not answered by then is left out. */
export const GATHER_TIMEOUT_MS = 2_000;

export type ToWorker =
  | { type: 'reload' }
  | { type: 'stop' }
  | { type: 'pids'; master: number; workers: number[] }
  | { type: 'collect'; id: number; topic: string; argument?: string }
  | { type: 'gathered'; id: number; values: unknown[] }
  | { type: 'admitted'; id: number; admission: Admission }
  | { type: 'reserved'; reservations: [id: number, reservation: QuotaReservation][] };
export type ToPrimary =
  | { type: 'listening'; lines: string[] }
  | { type: 'reloaded'; ok: boolean; errors: number; refused?: string }
  | { type: 'gather'; id: number; topic: string; argument?: string }
  | { type: 'collected'; id: number; value: unknown }
  /** The worker got a SIGTERM of its own: it asks the primary to stop it (and replace it). */
  | { type: 'retire' }
  | { type: 'admit'; id: number; keys: readonly string[]; limits: readonly number[]; ttlsMs: readonly number[]; requests: number }
  /** The quota operations of one turn of the worker's event loop, in order (one message, not one each). */
  | { type: 'quota'; ops: QuotaOp[] };

export type QuotaOp = { reserve: QuotaRequest; id: number } | { adjust: string; delta: string };
