/**
 * An example gRPC upstream for docs/grpc-websocket.md: greeter.proto's Greeter over h2c.
 *   npm run example:grpc-upstream       (listens on 127.0.0.1:5555, or PORT)
 * SIGTERM or SIGINT closes it and exits 0.
 */
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const port = Number(process.env.PORT ?? 5555);
// google/api/annotations.proto comes with protobufjs.
const includeDirs = [dirname(createRequire(import.meta.url).resolve('protobufjs/package.json'))];
const definition = protoLoader.loadSync(resolve(import.meta.dirname, 'greeter.proto'), { keepCase: true, includeDirs });
const greeter = (grpc.loadPackageDefinition(definition) as any).greeter.Greeter;

const server = new grpc.Server();
server.addService(greeter.service, {
  SayHello: ({ request }: { request: { name: string; shout: boolean } }, done: grpc.sendUnaryData<{ message: string }>) => {
    if (!request.name) return done({ code: grpc.status.INVALID_ARGUMENT, details: 'name is required' });
    const message = `hello ${request.name}`;
    done(null, { message: request.shout ? message.toUpperCase() : message });
  },
});
server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) throw err;
  console.log(`example gRPC upstream listening on grpc://127.0.0.1:${port}`);
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => server.tryShutdown(() => process.exit(0)));
