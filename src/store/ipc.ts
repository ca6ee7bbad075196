/**
 * The embedded store shared by a node's worker processes: the primary process owns LevelDB (one
 * process may open it) and serves the store contract over a private socket pair to each worker.
 *
 * Why not `many-level` (the Level project's module for this): it carries abstract-level's get, put,
 * batch and iterators, but not a compare-and-set, expiry or notices, which this contract needs done
 * where the database is; and its latest release (2.0.0) is built on abstract-level 1, whose callback
 * API classic-level 3 no longer has (hosting it, every call hangs). Hosting classic-level 1 it moved
 * as many puts and gets per second as this protocol does (bench/cluster.ts prints both). This
 * protocol is a handful of messages: a 4-byte length, then JSON `[id, method, ...args]`; answers
 * `[id, error, result]`; id 0 carries notices both ways. Writes made in one tick go out in one
 * socket write.
 *
 * commitIf runs in the owner, so it is serialised with every worker's as LevelStore serialises its
 * own. Notices published by a worker reach the owner's subscribers and every other worker; for
 * `publishAndWait` each worker confirms once it applied the notice, and the owner tells the publisher
 * when all have (id 0 frames: `publish`/`publishAndWait`/`applied` to the owner, `notice`/`settled` back).
 */
import type { Duplex } from 'node:stream';
import { StoreClosedError, StoreError, storeErrorFromWire } from './errors.ts';
import type { LevelStore } from './level.ts';
import { checkStrings, NAMESPACE_SEPARATOR, NamespacedStore, type PrefixedRoot } from './namespace.ts';
import { atMost, LocalNotices, SETTLE_TIMEOUT_MS } from './notices.ts';
import { pagedScan } from './order.ts';
import type { BatchOp, Expectation, NoticeListener, Notices, PutOptions, ScanOptions, Store, StoreAdapter, WriteBatch, WriteOptions } from './store.ts';

const NOTICE = 0;
/** A frame larger than this is refused: nothing the store contract carries comes near it. */
const MAX_FRAME_BYTES = 512 * 1024 * 1024;
/** How long after losing the store's owner this process drops its caches, if it is still running. */
const OWNER_LOSS_GRACE_MS = 2_000;

type Message = [id: number, ...rest: unknown[]];

/** Length-prefixed JSON frames over a stream, written in one go per tick. */
class FrameChannel {
  private buffered: Buffer[] = [];
  private bufferedBytes = 0;
  private corked = false;
  closed = false;

  constructor(
    private readonly stream: Duplex,
    onMessage: (message: Message) => void,
    onClose: (err?: Error) => void,
  ) {
    stream.on('data', (chunk: Buffer) => {
      this.buffered.push(chunk);
      this.bufferedBytes += chunk.length;
      try {
        for (const frame of this.frames()) onMessage(JSON.parse(frame) as Message);
      } catch (err) {
        stream.destroy(err as Error);
      }
    });
    const closed = (err?: Error) => {
      if (this.closed) return;
      this.closed = true;
      onClose(err);
    };
    stream.on('error', closed);
    stream.on('close', () => closed());
  }

  private *frames(): Iterable<string> {
    while (this.bufferedBytes >= 4) {
      if (this.buffered[0].length < 4) this.buffered = [Buffer.concat(this.buffered)];
      const length = this.buffered[0].readUInt32BE(0);
      if (length > MAX_FRAME_BYTES) throw new StoreError(`a store message of ${length} bytes is over the limit`);
      if (this.bufferedBytes < 4 + length) return;
      const all = this.buffered.length === 1 ? this.buffered[0] : Buffer.concat(this.buffered);
      const frame = all.toString('utf8', 4, 4 + length);
      const rest = all.subarray(4 + length);
      this.buffered = rest.length > 0 ? [rest] : [];
      this.bufferedBytes = rest.length;
      yield frame;
    }
  }

  send(message: Message): void {
    if (this.closed) return;
    const payload = Buffer.from(JSON.stringify(message));
    const header = Buffer.allocUnsafe(4);
    header.writeUInt32BE(payload.length, 0);
    if (!this.corked) {
      this.corked = true;
      this.stream.cork();
      process.nextTick(() => {
        this.corked = false;
        this.stream.uncork();
      });
    }
    this.stream.write(header);
    this.stream.write(payload);
  }

  end(): void {
    this.stream.end();
  }
}

/**
 * Notices of the owner: its own subscribers plus every connected worker. For `publishAndWait` it also
 * collects each worker's word that it applied the notice, and answers the publisher once all have.
 */
export class NoticeHub implements Notices {
  private readonly channels = new Set<FrameChannel>();
  /** Notices being applied, by sequence number: the channels still to confirm. */
  private readonly settling = new Map<number, { waiting: Set<FrameChannel>; allApplied: () => void }>();
  private sequence = 0;

  constructor(private readonly local: LocalNotices) {}

  add(channel: FrameChannel): () => void {
    this.channels.add(channel);
    return () => {
      this.channels.delete(channel);
      for (const seq of [...this.settling.keys()]) this.applied(channel, seq);
    };
  }

  publish(topic: string, message: string | null, from?: FrameChannel): void {
    void this.local.deliver(topic, message);
    for (const channel of this.channels) if (channel !== from) channel.send([NOTICE, 'notice', topic, message, 0]);
  }

  publishAndWait(topic: string, message: string, from?: FrameChannel): Promise<void> {
    const seq = ++this.sequence;
    const waiting = new Set([...this.channels].filter((channel) => channel !== from));
    const allApplied = new Promise<void>((resolve) => this.settling.set(seq, { waiting, allApplied: resolve }));
    for (const channel of waiting) channel.send([NOTICE, 'notice', topic, message, seq]);
    if (waiting.size === 0) this.applied(undefined, seq);
    const everywhere = Promise.all([this.local.deliver(topic, message), allApplied]).then(() => undefined);
    return atMost(everywhere, SETTLE_TIMEOUT_MS).finally(() => this.settling.delete(seq));
  }

  /** `channel` applied notice `seq` (or is gone). */
  applied(channel: FrameChannel | undefined, seq: number): void {
    const settling = this.settling.get(seq);
    if (!settling) return;
    if (channel) settling.waiting.delete(channel);
    if (settling.waiting.size === 0) settling.allApplied();
  }

  subscribe(topic: string, listener: NoticeListener): () => void {
    return this.local.subscribe(topic, listener);
  }
}

/** Serves `store` to the worker at the other end of `stream` until it closes. */
export function serveStore(store: LevelStore, hub: NoticeHub, stream: Duplex): void {
  const channel: FrameChannel = new FrameChannel(stream, (message) => void answer(message), () => remove());
  const remove = hub.add(channel);
  const answer = async ([id, method, ...args]: Message) => {
    if (id === NOTICE) {
      if (method === 'applied') return hub.applied(channel, args[0] as number);
      const [topic, message, settleId] = args as [string, string | null, number];
      if (typeof topic !== 'string') return;
      if (method === 'publish') hub.publish(topic, message, channel);
      else if (method === 'publishAndWait' && message !== null) void hub.publishAndWait(topic, message, channel).then(() => channel.send([NOTICE, 'settled', settleId]));
      return;
    }
    try {
      channel.send([id, null, await run(store, method as string, args)]);
    } catch (err) {
      const e = err as Error & { code?: string };
      channel.send([id, { name: e.name, message: e.message, code: e.code }, null]);
    }
  };
}

async function run(store: LevelStore, method: string, args: unknown[]): Promise<unknown> {
  switch (method) {
    case 'get':
      return (await store.get(args[0] as string)) ?? null;
    case 'getMany':
      return (await store.getMany(args[0] as string[])).map((v) => v ?? null);
    case 'batch':
      return store.batch(args[0] as BatchOp[], { sync: args[1] as boolean });
    case 'commitIf':
      return store.commitIf(expectations(args[0] as Expectation[]), args[1] as BatchOp[], { sync: args[2] as boolean });
    case 'scan': {
      const [gte, lt, reverse, limit] = args as [string, string, boolean, number];
      const page: [string, string][] = [];
      for await (const entry of store.scanRaw({ gte, lt, reverse, limit }, '')) page.push(entry);
      return page;
    }
    case 'sweep':
      return store.sweepExpired(args[0] as number);
    case 'reachable':
      return store.reachable();
    case 'nearData':
      return store.nearDataUnder(args[0] as string, args[1] as string, args[2] as unknown[]);
    default:
      throw new StoreError(`unknown store method ${method}`);
  }
}

/** JSON turns an absent expected value into null (arrays) or drops it (objects): both mean absent. */
function expectations(list: Expectation[]): Expectation[] {
  return list.map((e) => ({ key: e.key, value: e.value ?? undefined }));
}

/** A WriteBatch sent as one `batch` message. */
class RemoteWriteBatch implements WriteBatch {
  private ops: BatchOp[] | null = [];

  constructor(
    private readonly store: RemoteStore,
    private readonly base: string,
  ) {}

  private open(): BatchOp[] {
    if (!this.ops) throw new Error('this write batch was already written or discarded');
    return this.ops;
  }

  put(key: string, value: string, options?: PutOptions): void {
    checkStrings(key, value);
    this.open().push({ type: 'put', key: this.base + key, value, ttlMs: options?.ttlMs });
  }

  del(key: string): void {
    checkStrings(key, '');
    this.open().push({ type: 'del', key: this.base + key });
  }

  async write(options: WriteOptions = {}): Promise<void> {
    const ops = this.open();
    this.ops = null;
    if (ops.length > 0) await this.store.call('batch', ops, options.sync ?? false);
  }

  /** The owner's commitIf: LevelDB serialises every conditional write, so it is this batch's fenced write. */
  async writeIf(expectations: Expectation[], options: WriteOptions = {}): Promise<boolean> {
    const ops = this.open();
    this.ops = null;
    return this.store.call('commitIf', expectedUnder(this.base, expectations), ops, options.sync ?? false);
  }

  async discard(): Promise<void> {
    this.ops = null;
  }
}

/** The store of a worker process: every call goes to the owner over `stream`. */
export class RemoteStore implements StoreAdapter, PrefixedRoot {
  private readonly channel: FrameChannel;
  private readonly pending = new Map<number, { resolve(value: unknown): void; reject(err: Error): void }>();
  private nextId = 1;
  private readonly local = new LocalNotices();
  /** publishAndWait calls waiting for the owner's word that every other worker applied their notice. */
  private readonly settling = new Map<number, () => void>();
  private nextSettle = 1;
  readonly notices: Notices;

  constructor(stream: Duplex) {
    this.channel = new FrameChannel(stream, (m) => this.received(m), (err) => this.lost(err));
    this.notices = {
      publish: (topic, message) => {
        void this.local.deliver(topic, message);
        this.channel.send([NOTICE, 'publish', topic, message]);
      },
      publishAndWait: (topic, message) => this.publishAndWait(topic, message),
      subscribe: (topic, listener) => this.local.subscribe(topic, listener),
    };
  }

  private publishAndWait(topic: string, message: string): Promise<void> {
    const id = this.nextSettle++;
    const elsewhere = new Promise<void>((resolve) => this.settling.set(id, resolve));
    this.channel.send([NOTICE, 'publishAndWait', topic, message, id]);
    if (this.channel.closed) this.settling.get(id)!();
    const everywhere = Promise.all([this.local.deliver(topic, message), elsewhere]).then(() => undefined);
    // The owner answers within its own bound; this one only matters if it never does.
    return atMost(everywhere, 2 * SETTLE_TIMEOUT_MS).finally(() => this.settling.delete(id));
  }

  call(method: string, ...args: unknown[]): Promise<any> {
    if (this.channel.closed) return Promise.reject(new StoreClosedError('the process that owns the store is gone'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.channel.send([id, method, ...args]);
    });
  }

  private received([id, ...rest]: Message): void {
    if (id === NOTICE) {
      const [kind, ...notice] = rest;
      if (kind === 'settled') return this.settling.get(notice[0] as number)?.();
      if (kind !== 'notice') return;
      const [topic, message, seq] = notice as [string, string | null, number];
      const applied = this.local.deliver(topic, message);
      // seq 0: a plain publish, nobody waits for this process's word.
      if (seq) void applied.then(() => this.channel.send([NOTICE, 'applied', seq]));
      return;
    }
    const waiting = this.pending.get(id);
    if (!waiting) return;
    this.pending.delete(id);
    const [error, result] = rest as [{ name: string; message: string; code?: string } | null, unknown];
    if (error) waiting.reject(storeErrorFromWire(error));
    else waiting.resolve(result);
  }

  private lost(err?: Error): void {
    const closed = new StoreClosedError(`the process that owns the store is gone${err ? `: ${err.message}` : ''}`);
    for (const waiting of this.pending.values()) waiting.reject(closed);
    this.pending.clear();
    for (const settled of this.settling.values()) settled();
    // The owner is the node's primary: when it dies, Node ends this worker at once (its IPC channel
    // closed at the same moment). The caches are dropped only if this process goes on, rather than
    // every cache failing to refresh, and saying so, on the worker's way out.
    setTimeout(() => this.local.deliverLoss(), OWNER_LOSS_GRACE_MS).unref();
  }

  async open(): Promise<void> {}

  async close(): Promise<void> {
    this.channel.end();
  }

  async reachable(): Promise<boolean> {
    return !this.channel.closed && (await this.call('reachable'));
  }

  async get(key: string): Promise<string | undefined> {
    return (await this.call('get', key)) ?? undefined;
  }

  async getMany(keys: string[]): Promise<(string | undefined)[]> {
    if (keys.length === 0) return [];
    return ((await this.call('getMany', keys)) as (string | null)[]).map((v) => v ?? undefined);
  }

  put(key: string, value: string, options: PutOptions & WriteOptions = {}): Promise<void> {
    return this.batchUnder('', [{ type: 'put', key, value, ttlMs: options.ttlMs }], options);
  }

  del(key: string, options: WriteOptions = {}): Promise<void> {
    return this.batchUnder('', [{ type: 'del', key }], options);
  }

  batch(ops: BatchOp[], options: WriteOptions = {}): Promise<void> {
    return this.batchUnder('', ops, options);
  }

  async batchUnder(base: string, ops: BatchOp[], options: WriteOptions): Promise<void> {
    if (ops.length === 0) return;
    await this.call('batch', prefixed(base, ops), options.sync ?? false);
  }

  writeBatch(): WriteBatch {
    return this.writeBatchUnder('');
  }

  writeBatchUnder(base: string): WriteBatch {
    return new RemoteWriteBatch(this, base);
  }

  commitIf(expectations: Expectation[], ops: BatchOp[], options: WriteOptions = {}): Promise<boolean> {
    return this.commitIfUnder('', expectations, ops, options);
  }

  commitIfUnder(base: string, expectations: Expectation[], ops: BatchOp[], options: WriteOptions): Promise<boolean> {
    return this.call('commitIf', expectedUnder(base, expectations), prefixed(base, ops), options.sync ?? false);
  }

  scan(options: ScanOptions): AsyncIterable<[string, string]> {
    return this.scanRaw(options, '');
  }

  scanRaw(options: ScanOptions, base: string): AsyncIterable<[string, string]> {
    return pagedScan((gte, lt, reverse, limit) => this.call('scan', gte, lt, reverse, limit), options, base);
  }

  namespace(name: string): Store {
    return new NamespacedStore(this, name + NAMESPACE_SEPARATOR);
  }

  /** No journals: LevelDB has one writer process, which keeps its events in keys (see Journal). */
  journal(): null {
    return null;
  }

  journalUnder(): null {
    return null;
  }

  /** In the primary, which owns the database: only the answer crosses the socket. */
  nearData(procedure: string, args: unknown[]): Promise<unknown> {
    return this.nearDataUnder('', procedure, args);
  }

  nearDataUnder(base: string, procedure: string, args: unknown[]): Promise<unknown> {
    return this.call('nearData', base, procedure, args);
  }

  sweepExpired(now = Date.now()): Promise<number> {
    return this.call('sweep', now);
  }
}

/** Expectations with their keys below `base`, an absent value sent as null (JSON has no undefined). */
function expectedUnder(base: string, expectations: Expectation[]): { key: string; value: string | null }[] {
  return expectations.map((e) => ({ key: base + e.key, value: e.value ?? null }));
}

/** Operations with their keys below `base`, checked before anything is sent (a bad one fails the whole batch). */
function prefixed(base: string, ops: BatchOp[]): BatchOp[] {
  for (const op of ops) checkStrings(op.key, op.type === 'put' ? op.value : '');
  if (base === '') return ops;
  return ops.map((op) => ({ ...op, key: base + op.key }));
}
