/**
 * AWS's binary event stream (application/vnd.amazon.eventstream), written the way Bedrock frames
 * ConverseStream: each message is a prelude (total length, headers length, the prelude's CRC32),
 * string headers (`:event-type`, `:content-type`, `:message-type`), a JSON payload and the CRC32 of
 * everything before it. Built from JSON events so that no binary file is stored.
 */

export interface StreamedEvent {
  /** The `:event-type` header, e.g. messageStart or contentBlockDelta. */
  event: string;
  payload: unknown;
}

/** The messages of `events`, one after another, as Bedrock sends them. */
export function awsEventStream(events: StreamedEvent[]): Buffer {
  return Buffer.concat(events.map(({ event, payload }) => eventMessage({ ':event-type': event, ':content-type': 'application/json', ':message-type': 'event' }, payload)));
}

const PRELUDE_BYTES = 8;
const CRC_BYTES = 4;
const STRING_HEADER_TYPE = 7;

export function eventMessage(headers: Record<string, string>, payload: unknown): Buffer {
  const headerBytes = Buffer.concat(Object.entries(headers).map(([name, value]) => stringHeader(name, value)));
  const body = Buffer.from(JSON.stringify(payload), 'utf8');
  const total = PRELUDE_BYTES + CRC_BYTES + headerBytes.length + body.length + CRC_BYTES;
  const prelude = Buffer.alloc(PRELUDE_BYTES);
  prelude.writeUInt32BE(total, 0);
  prelude.writeUInt32BE(headerBytes.length, 4);
  const withoutCrc = Buffer.concat([prelude, uint32(crc32(prelude)), headerBytes, body]);
  return Buffer.concat([withoutCrc, uint32(crc32(withoutCrc))]);
}

/** A header: name length (1 byte), name, value type 7 (string), value length (2 bytes), value. */
function stringHeader(name: string, value: string): Buffer {
  const nameBytes = Buffer.from(name, 'utf8');
  const valueBytes = Buffer.from(value, 'utf8');
  const lengths = Buffer.alloc(3);
  lengths.writeUInt8(STRING_HEADER_TYPE, 0);
  lengths.writeUInt16BE(valueBytes.length, 1);
  return Buffer.concat([Buffer.from([nameBytes.length]), nameBytes, lengths, valueBytes]);
}

function uint32(value: number): Buffer {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(value, 0);
  return bytes;
}

/** CRC-32 (IEEE 802.3, the reflected polynomial 0xEDB88320), as the event stream's checksums are. */
const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let bit = 0; bit < 8; bit++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

export function crc32(bytes: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of bytes) crc = CRC_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
