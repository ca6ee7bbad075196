/** @fastify/http-proxy (fastify + @fastify/reply-from over an undici pool, keep-alive): every path to `argv[2]`. */
import proxy from '@fastify/http-proxy';
import Fastify from 'fastify';

const app = Fastify({ logger: false, keepAliveTimeout: 60_000 });
await app.register(proxy, { upstream: process.argv[2] });
console.log(`listening on ${await app.listen({ port: 0, host: '127.0.0.1' })}`);
