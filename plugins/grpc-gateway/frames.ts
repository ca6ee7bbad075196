/**
 * gRPC's length-prefixed messages (one flag byte, a 4-byte big-endian length, the message), as grpc-web
 * carries them too; its trailer frame is flag 0x80.
 */

export const TRAILER_FLAG = 0x80;

/** One length-prefixed frame. */
export function frame(message: Uint8Array, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

export interface Frame {
  flags: number;
  payload: Buffer;
}

/** The whole frames in `data`, and the bytes of an incomplete last one (`rest`, empty when none). */
export function unframe(data: Buffer): { frames: Frame[]; rest: Buffer } {
  const frames: Frame[] = [];
  let at = 0;
  while (data.length - at >= 5) {
    const end = at + 5 + data.readUInt32BE(at + 1);
    if (end > data.length) break;
    frames.push({ flags: data[at], payload: data.subarray(at + 5, end) });
    at = end;
  }
  return { frames, rest: data.subarray(at) };
}
