/** Kong's listen strings: `ADDRESS:PORT [ssl] [http2]`, or `off`. */
export interface ListenSpec {
  host: string;
  port: number;
  ssl: boolean;
  http2: boolean;
  /** The string as written, for messages. */
  text: string;
}

const FLAGS = new Set(['ssl', 'http2']);

export function parseListen(text: string): ListenSpec | { error: string } {
  const [address, ...flags] = text.trim().split(/\s+/);
  const unknown = flags.find((f) => !FLAGS.has(f));
  if (unknown) return { error: `unknown flag '${unknown}' (supported: ssl, http2)` };
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):(\d{1,5})$/.exec(address ?? '');
  if (!m) return { error: `invalid listen address '${address}': expected HOST:PORT` };
  const port = Number(m[3]);
  if (port > 65535) return { error: `invalid port ${port}` };
  const host = m[1] ?? (m[2] === '*' ? '0.0.0.0' : m[2]);
  return { host, port, ssl: flags.includes('ssl'), http2: flags.includes('http2'), text };
}

export function parseListenList(list: string[]): { specs: ListenSpec[]; errors: { index: number; message: string }[] } {
  const specs: ListenSpec[] = [];
  const errors: { index: number; message: string }[] = [];
  if (list.length === 1 && list[0].trim() === 'off') return { specs, errors };
  list.forEach((text, index) => {
    const r = parseListen(text);
    if ('error' in r) errors.push({ index, message: r.error });
    else specs.push(r);
  });
  return { specs, errors };
}
