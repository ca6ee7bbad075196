/**
 * The cache of a node: Kong's memory strategy keeps one nginx dictionary per node, which its workers
 * share. Here each process keeps its own dictionaries (a hit costs no message), and a process that
 * lacks an entry takes a copy from another process of the node before it asks the upstream; purges
 * reach every process of every node sharing the store (Kong broadcasts its purges to the cluster too).
 */
import type { PluginApi } from '../../src/pdk/index.ts';
import { Dictionaries, entryView, type CachedResponse } from './memory.ts';

const ENTRY_TOPIC = 'proxy-cache:entry';
const COPY_TOPIC = 'proxy-cache:copy';
const PURGE_TOPIC = 'proxy-cache:purge';
/**
 * How long a request waits for another process's copy before it goes upstream: a busy or stuck process
 * must not hold a request longer than the upstream would.
 */
const COPY_WAIT_MS = 200;

/** An entry asked for, or a purge: in one dictionary, or in all when `dictionary` is absent; everything when `key` is absent. */
export interface Where {
  dictionary?: string;
  key?: string;
}

/** An entry as it crosses to another process (as JSON): its body in base64 and how long it has left in storage. */
interface Copy {
  entry: Omit<CachedResponse, 'body'> & { body: string };
  storageMs: number;
}

export class NodeCache {
  readonly dictionaries = new Dictionaries();
  private readonly unsubscribe: () => void;

  constructor(private readonly api: PluginApi) {
    api.node.offer(ENTRY_TOPIC, (argument) => {
      const { dictionary, key } = JSON.parse(argument!) as Where;
      const entry = this.dictionaries.find(key!, dictionary);
      return entry ? entryView(entry) : null;
    });
    api.node.offer(COPY_TOPIC, (argument) => {
      const { dictionary, key } = JSON.parse(argument!) as Required<Where>;
      return this.copyOf(dictionary, key);
    });
    this.unsubscribe = api.store.notices.subscribe(PURGE_TOPIC, (message) => {
      // Lost notices (null): the purges they carried are made by dropping everything.
      const { dictionary, key } = message === null ? {} : (JSON.parse(message) as Where);
      this.dictionaries.purge(dictionary, key);
    });
  }

  /**
   * The newest of the other processes' entries, stored after `newerThan` (seconds) when given, kept in this
   * process too; undefined when none has one (or none answers in time). A purge made while a copy travels
   * may miss that copy: it lives on until its storage TTL, as an entry stored by a request in flight
   * during a purge does in Kong.
   */
  async copyFromNode(dictionary: string, key: string, newerThan = -Infinity): Promise<CachedResponse | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<unknown[]>((resolve) => (timer = setTimeout(() => resolve([]), COPY_WAIT_MS)));
    const copies = await Promise.race([this.api.node.gather(COPY_TOPIC, JSON.stringify({ dictionary, key })), late]).finally(() => clearTimeout(timer));
    const copy = copies
      .filter((value): value is Copy => value != null && (value as Copy).entry.timestamp > newerThan)
      .reduce<Copy | undefined>((newest, value) => (newest && newest.entry.timestamp >= value.entry.timestamp ? newest : value), undefined);
    if (!copy) return undefined;
    const entry = { ...copy.entry, body: Buffer.from(copy.entry.body, 'base64') };
    this.dictionaries.store(dictionary, key, entry, copy.storageMs / 1000);
    return entry;
  }

  /** The entry as Kong's admin API shows it, from whichever process of the node has it. */
  async entryOnNode(where: Where): Promise<unknown> {
    return (await this.api.node.gather(ENTRY_TOPIC, JSON.stringify(where))).find((entry) => entry != null);
  }

  /** Purges in every process of every node; resolves once this node's processes have. */
  purge(where: Where): Promise<void> {
    return this.api.store.notices.publishAndWait(PURGE_TOPIC, JSON.stringify(where));
  }

  close(): void {
    this.unsubscribe();
  }

  private copyOf(dictionary: string, key: string): Copy | null {
    const entry = this.dictionaries.find(key, dictionary);
    const storageMs = this.dictionaries.remainingMs(dictionary, key);
    if (!entry || storageMs <= 0) return null;
    return { entry: { ...entry, body: entry.body.toString('base64') }, storageMs };
  }
}
