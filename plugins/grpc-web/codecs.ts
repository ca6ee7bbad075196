/**
 * gRPC-Web's content types as Kong's grpc-web deco.lua reads them: whether the body is base64 text,
 * whether messages are length-prefixed (then a trailer frame ends the answer), and whether they are
 * JSON (transcoded with the proto) or protobuf (passed as they are).
 */
import { parseUntrustedJson } from '../../src/pdk/index.ts';
import { decodeMessage, encodeMessage, frame, TRAILER_FLAG, unframe, type MethodTypes } from '../grpc-gateway/public.ts';

export interface Codec {
  /** The content type of the request, and of the answer. */
  mimetype: string;
  base64: boolean;
  framed: boolean;
  /** JSON messages; undefined for a content type Kong does not know, which still needs the proto's method. */
  json: boolean | undefined;
}

const KNOWN: Record<string, Omit<Codec, 'mimetype'>> = {
  'application/grpc-web': { base64: false, framed: true, json: false },
  'application/grpc-web-text': { base64: true, framed: true, json: false },
  'application/grpc-web+proto': { base64: false, framed: true, json: false },
  'application/grpc-web-text+proto': { base64: true, framed: true, json: false },
  'application/grpc-web+json': { base64: false, framed: true, json: true },
  'application/grpc-web-text+json': { base64: true, framed: true, json: true },
  'application/json': { base64: false, framed: false, json: true },
};

export function codecOf(contentType: string | undefined): Codec {
  const mimetype = (contentType ?? '').split(';')[0].trim().toLowerCase();
  return { mimetype, ...(KNOWN[mimetype] ?? { base64: false, framed: false, json: undefined }) };
}

/** The client's body as the upstream's length-prefixed messages; a JSON message is encoded with the method's input type. */
export function upstreamBody(codec: Codec, types: MethodTypes | undefined, body: Buffer): Buffer {
  const bytes = codec.base64 ? Buffer.from(body.toString('latin1'), 'base64') : body;
  if (!codec.json || !types) return bytes;
  const json = codec.framed ? (unframe(bytes).frames[0]?.payload ?? Buffer.alloc(0)) : bytes;
  return frame(encodeMessage(types.input, parseUntrustedJson(json.toString('utf8')) as Record<string, unknown>));
}

/** The upstream's messages and status as the client's body: JSON when asked, then the trailer frame, base64 when text. */
export function downstreamBody(codec: Codec, types: MethodTypes | undefined, messages: Buffer, status: { code: string; message: string }): Buffer {
  let body = messages;
  if (codec.json && types) {
    const json = unframe(messages).frames.map((f) => Buffer.from(JSON.stringify(decodeMessage(types.output, f.payload))));
    body = Buffer.concat(codec.framed ? json.map((m) => frame(m)) : json);
  }
  if (!codec.framed) return encoded(codec, body);
  const trailer = frame(Buffer.from(`grpc-status:${status.code}\r\ngrpc-message:${status.message}\r\n`), TRAILER_FLAG);
  // Each part in base64 of its own, as Kong sends them (clients read concatenated base64 chunks).
  return Buffer.concat([encoded(codec, body), encoded(codec, trailer)]);
}

function encoded(codec: Codec, bytes: Buffer): Buffer {
  return codec.base64 && bytes.length > 0 ? Buffer.from(bytes.toString('base64')) : bytes;
}
