/**
 * The target of Kong's grpc-gateway spec as a real gRPC server (@grpc/grpc-js) on bouncer.proto:
 * SayHello greets, BounceIt tells how long ago `when` was before `now`, GrowTail grows the tail by one,
 * Echo echoes, Rename returns the body it was given, UnknownMethod is left unimplemented (UNIMPLEMENTED).
 */
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export const BOUNCER_PROTO = resolve(import.meta.dirname, 'bouncer.proto');
const googleApiProtos = dirname(createRequire(import.meta.url).resolve('protobufjs/package.json'));

interface Timestamp {
  seconds: number;
  nanos: number;
}

type Unary = (call: { request: any; metadata: grpc.Metadata }, callback: grpc.sendUnaryData<any>) => void;

const iso = (t: Timestamp) => new Date(t.seconds * 1000).toISOString().replace('.000', '');

const handlers: Record<string, Unary> = {
  SayHello: ({ request }, done) => done(null, { reply: `hello ${request.greeting}`, boolean_test: request.boolean_test }),
  BounceIt: ({ request }, done) =>
    done(null, { reply: `hello ${request.message}`, time_message: `${iso(request.when)} was ${request.now.seconds - request.when.seconds}s ago`, now: request.now }),
  GrowTail: ({ request }, done) => done(null, { ...request, tail: { ...request.tail, count: (request.tail?.count ?? 0) + 1 } }),
  Echo: ({ request }, done) => done(null, request),
  Rename: ({ request, metadata }, done) => done(null, { ...request, hands: { endings: String(metadata.get('x-consumer-username')[0] ?? '') } }),
};

export async function startBouncer(): Promise<{ port: number; close(): Promise<void> }> {
  const definition = protoLoader.loadSync(BOUNCER_PROTO, { keepCase: true, longs: Number, defaults: false, includeDirs: [googleApiProtos] });
  const proto = grpc.loadPackageDefinition(definition) as any;
  const server = new grpc.Server();
  server.addService(proto.targetservice.Bouncer.service, handlers);
  const port = await new Promise<number>((done, fail) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? fail(err) : done(bound))),
  );
  return { port, close: () => new Promise((done) => server.tryShutdown(() => done())) };
}
